/**
 * What askers see of a run: its public record (RunInfo), the same for a live run and for one
 * known only from the ledger, and the session an in-process child exposes to inspection. A run
 * only the ledger knows reads as its record says: a previous daemon's run is over (its
 * interrupted runs were recorded settled); a run another cluster member executes is running.
 *
 * `worker` is the daemon executing the run: a single daemon names itself; in a cluster, the
 * member that runs the child now (it moves on a takeover), as the child's DaemonRun or the
 * record says. The connection strips it for clients older than protocol 1.3.
 */
import type { RunInfo, RunState, SessionEvent, SessionHeader, SubagentResult, WorkerRef } from '../../protocol/index.js';
import type { StoredRun } from '../store/run-ledger.js';
import type { RunOwner } from './run-ownership.js';
import type { LiveRun } from './run-table.js';

/** The public record of a run, live or known only from the ledger. */
export function runInfo(
  run: {
    runId: string;
    id: string;
    provider: string;
    startedAt: string;
    settledAt?: string | undefined;
    result?: SubagentResult | undefined;
    parentRunId?: string | undefined;
    worker: WorkerRef;
  },
  state: RunState,
  mine: boolean,
  worker: WorkerRef = run.worker,
): RunInfo {
  return {
    runId: run.runId,
    id: run.id,
    provider: run.provider,
    state,
    startedAt: run.startedAt,
    mine,
    worker,
    ...(run.parentRunId !== undefined && { parentRunId: run.parentRunId }),
    ...(run.result && { stopReason: run.result.stopReason }),
    ...(run.settledAt !== undefined && { settledAt: run.settledAt }),
    ...(run.result?.usage && { usage: run.result.usage }),
    ...(run.result?.diagnostic !== undefined && { diagnostic: run.result.diagnostic }),
  };
}

export const liveInfo = (record: LiveRun, asker: RunOwner): RunInfo =>
  runInfo(record, record.state, record.owner === asker, record.run?.worker ?? record.worker);

/**
 * A stored run as askers see it: as recorded, a checkpoint being over. A running record that
 * this daemon does not hold is another cluster member's; a previous daemon's unfinished runs
 * were recorded interrupted (settled) before anyone could ask.
 */
export function storedState(stored: StoredRun): RunState {
  return stored.state === 'checkpointed' ? 'settled' : stored.state;
}

/** In-process children expose their session; anything else has nothing to inspect. */
export function sessionOf(agent: unknown): { header: SessionHeader; events: readonly SessionEvent[] } | undefined {
  if (typeof agent !== 'object' || agent === null) return undefined;
  const candidate = agent as { header?: unknown; events?: unknown };
  if (typeof candidate.header !== 'object' || !Array.isArray(candidate.events)) return undefined;
  return candidate as { header: SessionHeader; events: readonly SessionEvent[] };
}
