/**
 * The per-daemon token: random, written 0600 beside the socket (`<socket>.token`), presented at
 * `initialize`, so a socket path alone (handed to the wrong process, or reached through a looser
 * directory) is not enough to drive the daemon. One home for where the file is, how it is written
 * and read, and how a presented token is compared: the daemon writes and checks it, the client
 * and the `connect` relay read it.
 */
import { randomBytes, timingSafeEqual, createHash, readFileSync, writeFileSync, renameSync } from './node-builtins.js';

export function tokenPathFor(socketPath: string): string {
  return `${socketPath}.token`;
}

export function createToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Written to a temp file first so a reader never sees a partial token. */
export function writeTokenFile(path: string, token: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${token}\n`, { mode: 0o600 });
  renameSync(temp, path);
}

export function readTokenFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Constant-time: compares fixed-length digests so neither content nor length leaks by timing. */
export function tokensEqual(presented: string | undefined, expected: string): boolean {
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(presented ?? ''), digest(expected)) && presented !== undefined;
}
