/**
 * The seam between an endpoint's governor and a limit shared by a pool of daemons (cluster mode):
 * a permit the whole pool counts. A member's governor asks for one before each request it lets
 * through, and returns it with the request's outcome.
 */
import type { Outcome } from './governor.js';

export interface SharedPermit {
  release(outcome: Outcome): void;
}

export interface SharedLimit {
  /** Resolves with a permit once the pool has room; rejects when `signal` aborts (then nothing is held). */
  acquire(signal: AbortSignal): Promise<SharedPermit>;
}
