/**
 * Which queued run a member starts when it gets a slot: the run of the client that is served
 * least right now. Clients are ranked by runs executing (fewest first), then by when they were
 * last given a slot (longest ago first, never served first), then by their oldest queued run;
 * a client's own runs go in the order they were queued. So a client that floods the queue gets
 * one slot in turn with every other waiting client, wherever the clients are connected.
 */
import type { ClusterRun } from './cluster-run.js';

/**
 * `active`: the queued runs this member can run and every running run; `lastServed`: each
 * client's latest claim time (settled runs included), kept up to date by the caller.
 */
export function pickFairly(active: Iterable<ClusterRun>, lastServed: ReadonlyMap<string, string>): ClusterRun | undefined {
  const running = new Map<string, number>();
  const oldestQueued = new Map<string, ClusterRun>();
  for (const run of active) {
    if (run.state === 'running') running.set(run.owner, (running.get(run.owner) ?? 0) + 1);
    if (run.state !== 'queued') continue;
    const oldest = oldestQueued.get(run.owner);
    if (!oldest || before(run, oldest)) oldestQueued.set(run.owner, run);
  }
  let best: ClusterRun | undefined;
  for (const [owner, run] of oldestQueued) {
    if (!best) {
      best = run;
      continue;
    }
    const a = running.get(owner) ?? 0;
    const b = running.get(best.owner) ?? 0;
    if (a !== b) {
      if (a < b) best = run;
      continue;
    }
    const servedA = lastServed.get(owner) ?? '';
    const servedB = lastServed.get(best.owner) ?? '';
    if (servedA !== servedB) {
      if (servedA < servedB) best = run;
      continue;
    }
    if (before(run, best)) best = run;
  }
  return best;
}

const before = (a: ClusterRun, b: ClusterRun): boolean => a.queuedAt < b.queuedAt || (a.queuedAt === b.queuedAt && a.runId < b.runId);
