/**
 * Which peers may talk: the same major version of the wire (semver), checked by the daemon at
 * `initialize` and by the client on its answer. A mismatch is PROTOCOL_VERSION, with both
 * versions in the error's data. Within a major, a later minor only adds: the daemon reads a
 * client's minor to send it only what it can take (retry run events from 1.1 on).
 */
import { PROTOCOL_VERSION } from './messages.js';

const major = (version: string): string => version.split('.')[0] ?? version;

/** Does a peer speaking `version` share this side's major version? */
export function speaksOurMajor(version: string): boolean {
  return major(version) === major(PROTOCOL_VERSION);
}

/** The minor version of a peer of our major: what it can take that older minors could not. */
export function minorOf(version: string): number {
  return Number(version.split('.')[1] ?? 0);
}
