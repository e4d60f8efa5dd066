/**
 * The RunLedger of one daemon: records in the run index (run-index.ts, with its archive) and
 * admission by the in-memory AdmissionQueue. Every answer is ready when the call returns (the
 * Promise only satisfies the seam), `create`'s too: the record is readable through `get` at
 * once and written with the rest of the turn's changes. A client still never holds a token (or
 * a result) that a crash could forget: the daemon writes the index's pending records before each
 * write to a client (write-ahead, `RunIndex.flush` as the connections' `beforeWrite`).
 *
 * Rules and failures:
 * - Revisions count up from 1 per run; records from before revisions read as 0.
 * - `create` of a run id held in memory and `transition` from a stale revision reject with
 *   REVISION_CONFLICT; an unknown run id in `transition` rejects with UNKNOWN_RUN. `create` does
 *   not search the archive (a scan of every archived run's hash, per start): run ids are minted
 *   from 144 random bits (run-ownership.ts), so a new one never names an archived run.
 * - Writes never throw: a write fault is kept by the index (and reported to StateFaults), and
 *   `assertRecordable` refuses new runs until a retry succeeds.
 * - `leftBehind` is every unfinished record another epoch wrote: in one state dir only one
 *   daemon runs at a time (the state lock), so such a record's daemon is gone.
 */
import { hostname } from 'node:os';
import { SubagentError, type RunsListParams, type RunsListResult } from '../../protocol/index.js';
import { AdmissionQueue } from './admission-queue.js';
import { pageOfRuns } from './run-paging.js';
import type { RunIndex } from './run-index.js';
import type { AdmissionLimits, AdmissionStats, Lease, ListedRun, NewRun, RunLedger, RunPatch, StoredRun, WorkerRef } from './run-ledger.js';

export class LocalLedger implements RunLedger {
  readonly worker: WorkerRef;
  private readonly queue: AdmissionQueue;

  constructor(
    /** The run index of this daemon's state dir; daemon.ts also collects garbage through it. */
    readonly index: RunIndex,
    limits: AdmissionLimits,
    epoch: string,
  ) {
    this.worker = { id: epoch, host: hostname(), pid: process.pid };
    this.queue = new AdmissionQueue(limits);
  }

  get limits(): AdmissionLimits {
    return this.queue.limits;
  }

  assertRecordable(): void {
    this.index.assertRecordable();
  }

  create(run: NewRun): Promise<StoredRun> {
    if (this.index.held(run.runId)) return Promise.reject(conflict(`run ${run.runId} already has a record`));
    const stored: StoredRun = { ...run, revision: 1 };
    this.index.put(stored);
    return Promise.resolve(stored);
  }

  get(runId: string): Promise<StoredRun | undefined> {
    return Promise.resolve(this.index.get(runId));
  }

  transition(runId: string, patch: RunPatch, expectedRevision: number): Promise<StoredRun> {
    const current = this.index.get(runId);
    if (!current) return Promise.reject(new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`));
    if (current.revision !== expectedRevision) {
      return Promise.reject(conflict(`run ${runId} is at revision ${current.revision}, not ${expectedRevision}`));
    }
    const next: StoredRun = { ...current, ...patch, revision: expectedRevision + 1 };
    this.index.put(next);
    return Promise.resolve(next);
  }

  page(params: RunsListParams, see: (stored: StoredRun) => ListedRun): Promise<RunsListResult> {
    return Promise.resolve(pageOfRuns(seen(this.index.newestFirst(), see), params));
  }

  leftBehind(): Promise<StoredRun[]> {
    const unfinished = this.index.all().filter(
      (run) => run.worker.id !== this.worker.id && (run.state === 'running' || run.state === 'starting' || run.state === 'checkpointed'),
    );
    return Promise.resolve(unfinished);
  }

  admit(owner: string, _provider: string, signal: AbortSignal, onPosition?: (position: number) => void): Promise<Lease> {
    return this.queue.acquire(owner, signal, onPosition);
  }

  admission(): AdmissionStats {
    return this.queue.stats();
  }

  close(): Promise<void> {
    this.index.close();
    return Promise.resolve();
  }
}

function* seen(stored: Iterable<StoredRun>, see: (stored: StoredRun) => ListedRun): Generator<ListedRun> {
  for (const run of stored) yield see(run);
}

const conflict = (message: string): SubagentError => new SubagentError('REVISION_CONFLICT', message);
