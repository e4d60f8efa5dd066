/**
 * What askers see of a run: its public record (RunInfo), the same for a live run and for one
 * known only from the ledger, and the session an in-process child exposes to inspection. A run
 * only the ledger knows reads as whatever it ended as: a previous daemon's run is over (its
 * interrupted runs were recorded settled).
 */
import type { RunInfo, RunState, SessionEvent, SessionHeader, SubagentResult } from '../../protocol/index.js';
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
  },
  state: RunState,
  mine: boolean,
): RunInfo {
  return {
    runId: run.runId,
    id: run.id,
    provider: run.provider,
    state,
    startedAt: run.startedAt,
    mine,
    ...(run.parentRunId !== undefined && { parentRunId: run.parentRunId }),
    ...(run.result && { stopReason: run.result.stopReason }),
    ...(run.settledAt !== undefined && { settledAt: run.settledAt }),
    ...(run.result?.usage && { usage: run.result.usage }),
    ...(run.result?.diagnostic !== undefined && { diagnostic: run.result.diagnostic }),
  };
}

export const liveInfo = (record: LiveRun, asker: RunOwner): RunInfo => runInfo(record, record.state, record.owner === asker);

export const storedState = (stored: StoredRun): RunState => (stored.state === 'disposed' ? 'disposed' : 'settled');

/** In-process children expose their session; anything else has nothing to inspect. */
export function sessionOf(agent: unknown): { header: SessionHeader; events: readonly SessionEvent[] } | undefined {
  if (typeof agent !== 'object' || agent === null) return undefined;
  const candidate = agent as { header?: unknown; events?: unknown };
  if (typeof candidate.header !== 'object' || !Array.isArray(candidate.events)) return undefined;
  return candidate as { header: SessionHeader; events: readonly SessionEvent[] };
}
