/** One stored run, as the run index and the archive hold it (one JSON line per change). */
import type { RunState, SubagentResult, ToolFilter } from '../../protocol/index.js';

/** `checkpointed`: stopped at a drain's timeout, to be continued by the next daemon. */
export type IndexedState = RunState | 'checkpointed';

export interface IndexedRun {
  readonly runId: string;
  readonly id: string;
  readonly provider: string;
  /** sha256 of the owner's run token: proves ownership across connections and restarts. */
  readonly tokenHash: string;
  readonly state: IndexedState;
  readonly startedAt: string;
  readonly settledAt?: string;
  readonly result?: SubagentResult;
  /** The daemon that ran it: a restarted daemon tells its own runs from a dead one's. */
  readonly daemonEpoch: string;
  readonly daemonPid: number;
  /** The run whose child started this one (nested delegation). */
  readonly parentRunId?: string;
  /** Earlier run of the same child, for resumptions. */
  readonly resumedFrom?: string;
  /** What a later daemon needs to restore the child faithfully (see providers' `restore`). */
  readonly restore?: { readonly persona?: string; readonly toolFilter?: ToolFilter; readonly maxDepth?: number };
}
