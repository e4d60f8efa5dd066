/**
 * Which peers may talk: the same major version of the wire (semver), checked by the daemon at
 * `initialize` and by the client on its answer. A mismatch is PROTOCOL_VERSION, with both
 * versions in the error's data.
 */
import { PROTOCOL_VERSION } from './messages.js';

const major = (version: string): string => version.split('.')[0] ?? version;

/** Does a peer speaking `version` share this side's major version? */
export function speaksOurMajor(version: string): boolean {
  return major(version) === major(PROTOCOL_VERSION);
}
