/**
 * The RunLedger of a cluster member: this daemon's own ledger (local-ledger.ts: its run index and
 * its admission queue, unchanged) plus the pool's run records (run-records.ts), so that any
 * member answers `runs/list`, `run/inspect`, `run/wait` and `run/attach` for any run of the pool,
 * and the service does not know which ledger it runs on.
 *
 * Rules and failures:
 * - A run started through this member is recorded locally as before, and its token's hash is
 *   written into its pool record (compare-and-set, retried on top of the executing member's
 *   writes) before its starter holds the token: from then on every member can check an attach.
 *   A pool record without a token's hash is a start not yet answered: no member lists it, and a
 *   run waiting for a slot is never `running`.
 * - `get` answers from the local index first (with the pool record's `worker`, which moves on a
 *   takeover), else from the pool record: its state, outcome and worker as the executing member
 *   wrote them.
 * - `page` lists this member's runs (its run index) and every run of the pool started through
 *   another member, newest first.
 * - `adopt` moves a running run's `ownerMember` here by compare-and-set and returns a handle
 *   that follows its record to its outcome (adopted-run.ts); the executing member then sends the
 *   run's events here. Undefined when the record is no longer running. The member the
 *   owner moved from hands the run over (its waiters get HANDED_OVER) and lets go of it.
 * - Once a run's owner moved to another member, that member answers for it: this member's run
 *   index (still `running` where it let go) is not listed for it, and `get` answers from the
 *   pool record.
 * - `transition` writes the local index for a run this member started (the revision `get` and
 *   `adopt` hand out for it is the index's). A run known only from the pool is written by the
 *   member executing it: `transition` of such a run (its owner's settle and dispose, on this
 *   member) writes nothing and answers the record as it stands.
 */
import type { Logger } from 'pino';
import { SubagentError, type RunsListParams, type RunsListResult } from '../../protocol/index.js';
import type { RunHost } from '../provider.js';
import type { LocalLedger } from '../store/local-ledger.js';
import { pageOfRuns } from '../store/run-paging.js';
import type { AdmissionStats, Lease, ListedRun, NewRun, RunLedger, RunPatch, StoredRun, WorkerRef } from '../store/run-ledger.js';
import { adoptedRun } from './adopted-run.js';
import type { ClusterDaemonRun, FrontContext } from './cluster-provider.js';
import type { ClusterRun } from './cluster-run.js';
import type { Revisioned } from './run-records.js';

export class ClusterLedger implements RunLedger {
  constructor(
    private readonly local: LocalLedger,
    private readonly front: FrontContext,
    /** This member, as the pool's records name it. */
    readonly worker: WorkerRef,
    private readonly log: Logger,
  ) {}

  get limits(): RunLedger['limits'] {
    return this.local.limits;
  }

  assertRecordable(): void {
    this.local.assertRecordable();
  }

  async create(run: NewRun): Promise<StoredRun> {
    const [stored] = await Promise.all([this.local.create(run), this.publishToken(run)]);
    return stored;
  }

  async get(runId: string): Promise<StoredRun | undefined> {
    const local = await this.local.get(runId);
    const seenHere = this.records.seen(runId);
    if (local && !this.ownedElsewhere(seenHere?.record)) {
      const worker = seenHere?.record.worker;
      return worker && worker.id !== local.worker.id ? { ...local, worker } : local;
    }
    const pooled = await this.published(runId);
    return (pooled && answer(pooled, local)) ?? local;
  }

  async transition(runId: string, patch: RunPatch, expectedRevision: number): Promise<StoredRun> {
    if (this.local.index.get(runId)) return this.local.transition(runId, patch, expectedRevision);
    const pooled = await this.published(runId);
    const stored = pooled && storedOf(pooled.record, pooled.revision);
    if (!stored) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`);
    return stored;
  }

  page(params: RunsListParams, see: (stored: StoredRun) => ListedRun): Promise<RunsListResult> {
    const others: StoredRun[] = [];
    const me = this.front.relay.memberId;
    for (const { record, revision } of this.records.all()) {
      if (record.front === me && !this.ownedElsewhere(record)) continue; // the local index answers
      const stored = storedOf(record, revision);
      if (stored) others.push(stored);
    }
    others.sort((a, b) => (a.startedAt === b.startedAt ? (a.runId < b.runId ? 1 : -1) : a.startedAt < b.startedAt ? 1 : -1));
    const mine = filtered(this.local.index.newestFirst(), (run) => !this.ownedElsewhere(this.records.seen(run.runId)?.record));
    return Promise.resolve(pageOfRuns(seen(newestFirst(mine, others), see), params));
  }

  leftBehind(): Promise<StoredRun[]> {
    return this.local.leftBehind();
  }

  async adopt(runId: string, host: RunHost, signal: AbortSignal): Promise<{ run: ClusterDaemonRun; stored: StoredRun } | undefined> {
    const moved = await this.moveOwnerHere(runId);
    if (!moved) return undefined;
    return { run: adoptedRun(moved.record, host, signal, this.front), stored: answer(moved, await this.local.get(runId))! };
  }


  admit(owner: string, provider: string, signal: AbortSignal, onPosition?: (position: number) => void): Promise<Lease> {
    return this.local.admit(owner, provider, signal, onPosition);
  }

  admission(): AdmissionStats {
    const execution = this.front.executionSlots?.();
    return execution ? { ...this.local.admission(), execution } : this.local.admission();
  }

  executesHere(runId: string): boolean {
    return this.front.lentTicket?.(runId) !== undefined;
  }

  close(): Promise<void> {
    return this.local.close();
  }

  /** The record's owner, by compare-and-set: this member, while the run executes; undefined once it does not. */
  private async moveOwnerHere(runId: string): Promise<Revisioned<ClusterRun> | undefined> {
    const me = this.front.relay.memberId;
    for (;;) {
      const current = await this.records.get(runId);
      if (!current || current.record.state !== 'running' || current.record.tokenHash === undefined) return undefined;
      if (current.record.ownerMember === me) return current;
      const moved: ClusterRun = { ...current.record, ownerMember: me };
      try {
        const revision = await this.records.transition(runId, moved, current.revision);
        this.log.info({ runId, from: current.record.ownerMember, worker: moved.worker?.id }, 'cluster: a client re-attached a run here; its events now come to this member');
        return { record: moved, revision };
      } catch (error) {
        if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) throw error;
        // The executing member wrote meanwhile: look again.
      }
    }
  }

  /** A run this member started whose client re-attached through another member: the pool record answers for it. */
  private ownedElsewhere(record: ClusterRun | undefined): boolean {
    return record !== undefined && record.tokenHash !== undefined && record.ownerMember !== this.front.relay.memberId;
  }

  private get records(): FrontContext['scheduler']['records'] {
    return this.front.scheduler.records;
  }

  /** The pool record of a published run: the live view's when it has the token's hash, else the bucket's. */
  private async published(runId: string): Promise<Revisioned<ClusterRun> | undefined> {
    const seenHere = this.records.seen(runId);
    if (seenHere?.record.tokenHash !== undefined) return seenHere;
    const stored = await this.records.get(runId);
    return stored?.record.tokenHash !== undefined ? stored : undefined;
  }

  /** Writes the token's hash into the run's pool record; a run outside the pool (no record) has none to write. */
  private async publishToken(run: NewRun): Promise<void> {
    try {
      await this.writeToken(run);
    } finally {
      this.front.answerWrites.done(run.runId);
    }
  }

  private async writeToken(run: NewRun): Promise<void> {
    const local = this.front.localStarts.get(run.runId);
    if (local) return this.createLocal(local, run);
    let current = this.records.seen(run.runId);
    while (current) {
      const next: ClusterRun = {
        ...current.record,
        tokenHash: run.tokenHash,
        front: this.front.relay.memberId,
        ...(run.parentRunId !== undefined && { parentRunId: run.parentRunId }),
        // Its worker is this member and left the child's id to this write (cluster-worker.ts).
        ...(current.record.childId === undefined && { childId: run.id, startedAt: run.startedAt }),
      };
      try {
        await this.records.transition(run.runId, next, current.revision);
        return;
      } catch (error) {
        if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) {
          // The run goes on here; only an attach through another member cannot find it.
          this.log.warn({ err: error, runId: run.runId }, 'cluster: the run token could not be published to the pool');
          return;
        }
        current = await this.records.get(run.runId);
      }
    }
  }

  /**
   * A local start's record, made when it is answered (local-starts.ts `startHere`): `running`
   * here, with the child's id and the token's hash, one create; already settled when its child's
   * outcome came before the write left (answer-writes.ts). Refused, the start fails (the service
   * disposes its run): no member could find, attach or take it over.
   */
  private async createLocal(local: ClusterRun, run: NewRun): Promise<void> {
    this.front.localStarts.delete(run.runId);
    const record: ClusterRun = {
      ...local,
      tokenHash: run.tokenHash,
      front: this.front.relay.memberId,
      ...(run.parentRunId !== undefined && { parentRunId: run.parentRunId }),
      childId: run.id,
      startedAt: run.startedAt,
    };
    try {
      await this.records.create(record, (made) => ({ ...made, ...this.front.answerWrites.leaving(run.runId) }));
    } catch (error) {
      throw new SubagentError('CLUSTER_UNAVAILABLE', `the run's record could not be written to the pool: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

/**
 * The pool record as the service's StoredRun, with the revision of the store `transition` writes
 * for it: the local index's for a run this member started (it writes there), else the pool's.
 */
function answer(pooled: Revisioned<ClusterRun>, local: StoredRun | undefined): StoredRun | undefined {
  const stored = storedOf(pooled.record, pooled.revision);
  return stored && local ? { ...stored, revision: local.revision } : stored;
}

/** A published pool record as the service's StoredRun; undefined before its start was answered. */
function storedOf(run: ClusterRun, revision: number): StoredRun | undefined {
  if (run.tokenHash === undefined || run.childId === undefined || run.worker === undefined) return undefined;
  const { persona, toolFilter, maxDepth } = run.request;
  const restore = {
    ...(persona !== undefined && { persona }),
    ...(toolFilter !== undefined && { toolFilter }),
    ...(maxDepth !== undefined && { maxDepth }),
  };
  return {
    runId: run.runId,
    id: run.childId,
    provider: run.provider,
    tokenHash: run.tokenHash,
    state: run.state === 'queued' ? 'starting' : run.state,
    startedAt: run.startedAt ?? run.queuedAt,
    ...(run.settledAt !== undefined && { settledAt: run.settledAt }),
    ...(run.result && { result: run.result }),
    worker: run.worker,
    revision,
    ...(run.parentRunId !== undefined && { parentRunId: run.parentRunId }),
    ...(Object.keys(restore).length > 0 && { restore }),
  };
}

/** Two newest-first sequences as one, by start time. */
function* newestFirst(a: Iterable<StoredRun>, b: readonly StoredRun[]): Generator<StoredRun> {
  let at = 0;
  for (const run of a) {
    while (at < b.length && b[at]!.startedAt > run.startedAt) yield b[at++]!;
    yield run;
  }
  while (at < b.length) yield b[at++]!;
}

function* filtered(runs: Iterable<StoredRun>, keep: (run: StoredRun) => boolean): Generator<StoredRun> {
  for (const run of runs) if (keep(run)) yield run;
}

function* seen(stored: Iterable<StoredRun>, see: (stored: StoredRun) => ListedRun): Generator<ListedRun> {
  for (const run of stored) yield see(run);
}
