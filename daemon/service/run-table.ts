/**
 * The runs this daemon holds in memory: those it published (live until disposed, then kept a
 * while for run/wait and run/inspect), those adopted from the ledger by an attach, and the
 * starts still waiting for a slot or for their child. The ledger has every run's record; this
 * table has what only a live process has (the child, its host, its abort controller, waiters).
 *
 * Rules:
 * - At most DISPOSED_RETENTION disposed runs stay, holding at most DISPOSED_RETENTION_BYTES of
 *   output between them; the oldest go first, never the one just disposed. (A run's output may be
 *   up to `maxOutputBytes`, 2 MiB by default: by count alone, 1,000 of them could hold 2 GiB.)
 * - `owned` is the one ownership check: UNKNOWN_RUN for an id nobody recorded, NOT_OWNER for a
 *   run of another connection or one known only from the ledger (attach with its token first).
 * - Cancelling a run cancels the runs its child started (nested delegation), depth first.
 */
import { blocksBytes, SubagentError, type RunState, type SubagentResult, type WorkerRef } from '../../protocol/index.js';
import type { DaemonRun } from '../provider.js';
import type { RunLedger } from '../store/run-ledger.js';
import type { OwnedRunHost } from './run-hosting.js';
import type { RunOwner } from './run-ownership.js';

/** A run this daemon holds in memory. */
export interface LiveRun {
  readonly runId: string;
  /** The run whose child started this one (nested delegation inside the daemon). */
  readonly parentRunId?: string;
  readonly provider: string;
  readonly id: string;
  readonly local: boolean;
  owner: RunOwner;
  readonly tokenHash: string;
  /** Undefined for a run known only from the ledger (a previous daemon ran it) until restored. */
  run: DaemonRun | undefined;
  /** Cancels this run (and, before readiness, its start). */
  readonly abort: AbortController;
  host: OwnedRunHost | undefined;
  readonly startedAt: string;
  /** The daemon executing the child as last known (the child's own `worker` is fresher while it lives). */
  worker: WorkerRef;
  state: RunState;
  settledAt?: string;
  result?: SubagentResult;
  readonly settled: Promise<SubagentResult>;
  disposing?: Promise<void>;
  /** Stopped at a drain's timeout to be continued by the next daemon: its end is not this daemon's to report. */
  checkpointed?: boolean;
  /** Settled, undisposed, and left `settled` in the ledger by a drain: its owner may resume it under the next daemon. */
  keptForNextDaemon?: boolean;
  graceTimer?: NodeJS.Timeout;
  /** Cancelled `after-step` (itself or an ancestor): it and every run it starts end after their current step. */
  stopsAfterStep?: boolean;
  /** The ledger record's revision as last written, and the chain that writes its transitions in order. */
  revision: number;
  recorded: Promise<void>;
}

/** A start between its checks and its publication: cancelled when its owner goes or the daemon stops. */
export interface PendingStart {
  readonly owner: RunOwner;
  readonly abort: AbortController;
}

/** How many disposed runs stay answerable in memory to run/wait and run/inspect, and how much of their output. */
const DISPOSED_RETENTION = 1000;
const DISPOSED_RETENTION_BYTES = 16 * 1024 * 1024;

export class RunTable {
  private readonly runs = new Map<string, LiveRun>();
  /** The runs with a parent run (nested delegation): what a cancel or dispose scans, not every run. */
  private readonly nested = new Set<LiveRun>();
  readonly starting = new Map<string, PendingStart>();
  /** The disposed runs held, by id, with their output's bytes; and the sum. */
  private readonly disposedBytes = new Map<string, number>();
  private heldDisposedBytes = 0;

  get(runId: string): LiveRun | undefined {
    return this.runs.get(runId);
  }

  add(run: LiveRun): void {
    this.runs.set(run.runId, run);
    if (run.parentRunId !== undefined) this.nested.add(run);
  }

  /** A run whose publication failed: it never existed for anyone. */
  forget(run: LiveRun): void {
    if (this.runs.get(run.runId) === run) this.drop(run.runId, run);
    this.nested.delete(run);
  }

  values(): IterableIterator<LiveRun> {
    return this.runs.values();
  }

  /** A run the asking connection owns; UNKNOWN_RUN or NOT_OWNER otherwise. */
  async owned(runId: string, owner: RunOwner, ledger: RunLedger): Promise<LiveRun> {
    const record = this.runs.get(runId);
    if (!record) {
      const known = (await ledger.get(runId)) !== undefined;
      throw known
        ? new SubagentError('NOT_OWNER', `run ${runId} is not held by this daemon (a previous daemon's, or another cluster member's): run/attach with its token first`, {
            field: '/runId',
          })
        : new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
    }
    if (record.owner !== owner) throw new SubagentError('NOT_OWNER', `run ${runId} belongs to another connection`, { field: '/runId' });
    return record;
  }

  /** Nested delegation: a cancelled or disposed run takes the runs its child started down with it. */
  cancelDescendants(runId: string): void {
    for (const child of this.nested) {
      if (child.parentRunId !== runId || child.state !== 'running') continue;
      child.abort.abort(new SubagentError('ABORTED', `its parent run ${runId} was cancelled`));
      this.cancelDescendants(child.runId);
    }
  }

  /**
   * Nested delegation: an `after-step` cancel reaches every descendant at the same level, so the
   * whole lineage ends within one step of each run (a descendant without `interrupt` stops now).
   */
  stopAfterStep(run: LiveRun): void {
    run.stopsAfterStep = true;
    if (run.run?.interrupt) run.run.interrupt('after-step');
    else run.abort.abort(new SubagentError('ABORTED', 'the run was cancelled'));
    for (const child of this.nested) {
      if (child.parentRunId === run.runId && child.state === 'running' && !child.stopsAfterStep) this.stopAfterStep(child);
    }
  }

  counts(): Record<RunState, number> {
    const counts: Record<RunState, number> = { starting: this.starting.size, running: 0, settled: 0, disposed: 0 };
    for (const record of this.runs.values()) counts[record.state] += 1;
    return counts;
  }

  /** Whether any run still works or waits to start. */
  get busy(): boolean {
    if (this.starting.size > 0) return true;
    for (const record of this.runs.values()) if (record.state === 'running') return true;
    return false;
  }

  /** `run` was disposed: past the retention, the oldest disposed runs are forgotten. */
  disposed(run: LiveRun): void {
    const bytes = blocksBytes(run.result?.output ?? []);
    this.heldDisposedBytes += bytes - (this.disposedBytes.get(run.runId) ?? 0);
    this.disposedBytes.set(run.runId, bytes);
    for (const [runId, record] of this.runs) {
      if (this.disposedBytes.size <= DISPOSED_RETENTION && this.heldDisposedBytes <= DISPOSED_RETENTION_BYTES) break;
      if (record.state === 'disposed' && record !== run) this.drop(runId, record);
    }
  }

  private drop(runId: string, record: LiveRun): void {
    this.runs.delete(runId);
    this.nested.delete(record);
    this.heldDisposedBytes -= this.disposedBytes.get(runId) ?? 0;
    this.disposedBytes.delete(runId);
  }
}
