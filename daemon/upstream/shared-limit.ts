/**
 * The seam between an endpoint's governor and the limits shared by a pool of daemons (cluster mode):
 * a permit the whole pool counts. A member's governor asks for one before each request it lets
 * through, and returns it with the request's outcome.
 */

/** How a request ended, as a permit's release reports it. */
export type Outcome =
  | { readonly kind: 'ok'; readonly tokens?: number }
  /** 429 or 503: the provider pushed back. */
  | { readonly kind: 'throttled'; readonly retryAfterMs?: number | undefined }
  /** Any other end (an error, a cancel): the permit is returned, the limit unchanged. */
  | { readonly kind: 'other' };

export interface SharedPermit {
  release(outcome: Outcome): void;
}

export interface SharedLimit {
  /** Resolves with a permit once the pool has room; rejects when `signal` aborts (then nothing is held). */
  acquire(signal: AbortSignal): Promise<SharedPermit>;
}
