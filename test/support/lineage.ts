/** Helpers for tests of delegating lineages (nested starts), on one daemon or a cluster. */
import type { RunInfo } from '../../protocol/index.js';

/** Rejects with `what` after `ms`: a deadlock fails the test instead of hanging it. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** The lineage in `all`, root first, following parentRunId from `rootId` (default: the one run without a parent). */
export function chain(all: RunInfo[], rootId?: string): RunInfo[] {
  const out: RunInfo[] = [];
  let next = all.find((r) => (rootId === undefined ? r.parentRunId === undefined : r.runId === rootId));
  while (next) {
    out.push(next);
    const parent: string = next.runId;
    next = all.find((r) => r.parentRunId === parent);
  }
  return out;
}
