/**
 * The seam between an endpoint's governor and the limits shared by a pool of daemons (cluster
 * mode): the pool holds the endpoint's whole limit state (limit-state.ts) and decides. A member's
 * governor asks it for a permit before each request it lets through (in its own fair order), tells
 * it when the response begins, and returns the permit with the request's outcome.
 */
import type { LimitView, Outcome, WindowLimits } from './limit-state.js';

export type { Outcome };

export interface SharedPermit {
  /** The response's first data arrived (the provider serves it: what a cut measures). */
  streaming(): void;
  release(outcome: Outcome): void;
}

export interface SharedLimit {
  /** Resolves with a permit once the pool has room under `limits`; rejects when `signal` aborts (then nothing is held). */
  acquire(signal: AbortSignal, limits: WindowLimits): Promise<SharedPermit>;
  /** The pool's state as this member last saw it (undefined before it has seen any); asks for a fresher one. */
  view(limits: WindowLimits): LimitView | undefined;
}
