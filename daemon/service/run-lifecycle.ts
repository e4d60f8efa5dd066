/**
 * A run's life in the service from publication to disposal: its ledger record, its settle, and
 * the lifecycle notices to its owner and to listeners.
 *
 * Rules:
 * - Publication puts the run in the run table, then records it and awaits the record (a new
 *   run: `create`, stored before the starter holds the token: the local ledger writes it before
 *   any client hears of it, a cluster's store answers once it holds it; a checkpointed run
 *   taken over, or a run adopted from another cluster member: a transition to `running` under
 *   the worker executing it), then observes its result,
 *   announces it (`subagent/start`), and opens its host once the start is answered
 *   (run-hosting.ts). The settle waits for that opening: a run's end follows its start reply.
 *   If the record cannot be written, the child is disposed and the start fails.
 * - Later changes of the record are transitions written in order, each from the revision the
 *   previous one returned; a failed one is logged (the run goes on; its record lags).
 * - A checkpointed run's settle is no outcome: its waiters get HANDED_OVER. So is a run whose
 *   result rejects with HANDED_OVER (its client re-attached it through another cluster member):
 *   it also leaves the run table, and a later attach here finds it through the ledger again.
 * - A result is bounded (output-budget.ts) before it is recorded or sent; an infrastructure
 *   fault settles `error` with the fault in the end notice, and rejects waiters.
 * - Delivery to the owner comes first, then listeners; a throwing or rejecting one is logged.
 */
import type { Logger } from 'pino';
import { SubagentError, endEventOf, type EndParams, type StartResult, type SubagentResult, type SubagentStartEvent } from '../../protocol/index.js';
import type { DaemonRun } from '../provider.js';
import type { Lease, RunLedger, RunPatch, StoredRun } from '../store/run-ledger.js';
import { boundedResult } from './output-budget.js';
import type { OwnedRunHost } from './run-hosting.js';
import { isoNow } from '../../common/iso-time.js';
import { mintToken, type MintedToken, type RunOwner, type StartAnswer } from './run-ownership.js';
import { handedOver } from './run-recovery.js';
import type { LiveRun, RunTable } from './run-table.js';

export type LifecycleEvent = { kind: 'start'; payload: SubagentStartEvent } | { kind: 'end'; payload: EndParams };
export type LifecycleListener = (event: LifecycleEvent) => void | Promise<void>;

/** How a run came to be published: a new run, a resumption, or a recorded run taken over (checkpointed, or adopted from another member). */
export interface Lineage {
  readonly resumedFrom?: string;
  readonly restore?: StoredRun['restore'];
  readonly continues?: StoredRun;
  readonly parentRunId?: string;
  /** The token a keyed start minted before claiming its key (the pool's key entry holds it from the claim on). */
  readonly token?: MintedToken;
}

export class RunLifecycle {
  readonly listeners = new Set<LifecycleListener>();
  /**
   * The two lines every run logs (started, ended), without the logger's secret redaction: their
   * fields are fixed here and hold no secret, and redaction costs several times the line itself.
   */
  private readonly runLines: Logger;

  constructor(
    private readonly ledger: RunLedger,
    private readonly table: RunTable,
    private readonly log: Logger,
    private readonly maxOutputBytes: number,
    private readonly shuttingDown: () => boolean,
  ) {
    this.runLines = log.child({}, { redact: [] });
  }

  /**
   * Publish a ready run: record it (its first record is in before its starter holds the token),
   * observe its result, announce it, and open its host once the answer is out (at once without a
   * StartAnswer: the caller has the answer when this returns). The settle waits for that opening.
   */
  async publish(
    provider: string,
    run: DaemonRun,
    owner: RunOwner,
    abort: AbortController,
    host: OwnedRunHost,
    lease: Lease,
    answer: StartAnswer | undefined,
    lineage: Lineage,
    accept?: () => boolean,
  ): Promise<StartResult> {
    const identity: SubagentStartEvent = { runId: host.runId, provider, id: run.id, local: run.localAgent !== undefined };
    const continues = lineage.continues;
    // A continuation keeps its run's token (the owner re-attaches with the one it holds).
    const minted = continues === undefined ? (lineage.token ?? mintToken()) : undefined;
    const runToken = minted?.token ?? '';
    const tokenHash = continues?.tokenHash ?? minted!.hash;
    const startedAt = continues?.startedAt ?? isoNow();
    let resolveSettled!: (result: SubagentResult) => void;
    let rejectSettled!: (error: unknown) => void;
    const settled = new Promise<SubagentResult>((resolve, reject) => {
      resolveSettled = resolve;
      rejectSettled = reject;
    });
    settled.catch(() => undefined);
    const record: LiveRun = {
      ...identity,
      ...(lineage.parentRunId !== undefined && { parentRunId: lineage.parentRunId }),
      owner,
      tokenHash,
      run,
      abort,
      host,
      startedAt,
      worker: run.worker ?? this.ledger.worker,
      state: 'running',
      settled,
      revision: 0,
      recorded: Promise.resolve(),
    };
    // In the table before the record is awaited: the child is already working, and may start a
    // nested run of its own (which looks its parent up) while its first record is committed.
    const replaced = this.table.get(record.runId); // a checkpointed run taken over: its entry so far
    this.table.add(record);
    const written = continues
      ? this.ledger.transition(continues.runId, { state: 'running', worker: record.worker }, continues.revision)
      : this.ledger.create({
          runId: identity.runId,
          id: identity.id,
          provider,
          tokenHash,
          state: 'running',
          startedAt,
          worker: record.worker,
          ...(lineage.resumedFrom !== undefined && { resumedFrom: lineage.resumedFrom }),
          ...(lineage.parentRunId !== undefined && { parentRunId: lineage.parentRunId }),
          ...(lineage.restore !== undefined && { restore: lineage.restore }),
        });
    // Later transitions (a dispose meanwhile) follow the first record.
    record.recorded = written.then(
      (stored) => void (record.revision = stored.revision),
      () => undefined,
    );
    try {
      // Answered as soon as it is recorded, with no wait for a cancel that may follow: one read
      // later (a poll phase) is a late cancel, which acts on the run (connection/direct-lane.ts).
      await written;
      // Cancelled while the record was written (a pool's store answers later): rolled back before any lifecycle event.
      if (accept && !accept()) {
        this.record(record, { state: 'disposed', settledAt: isoNow(), result: { output: [], stopReason: 'aborted' } });
        throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
      }
    } catch (error) {
      this.table.forget(record);
      if (replaced) this.table.add(replaced);
      await run.dispose().catch(() => undefined);
      lease.release();
      throw error;
    }
    run.result.finally(() => lease.release()).then(
      (result) => host.afterAnswer(() => this.settle(record, result, undefined, resolveSettled, rejectSettled)),
      (error: unknown) => host.afterAnswer(() => this.settle(record, undefined, error, resolveSettled, rejectSettled)),
    );
    this.emit(record, { kind: 'start', payload: identity }, answer);
    // Logged once the answer has its place: the log file's write then follows the reply's.
    const opened = (): void => {
      this.runLines.info({ runId: record.runId, provider, owner: owner.id }, 'run started');
      host.answered();
    };
    if (answer) answer.whenSent(identity.runId, opened);
    else opened();
    return { ...identity, runToken };
  }

  /** Writes a transition of a live run's record, in order after the ones before it. */
  record(live: LiveRun, patch: RunPatch): void {
    live.recorded = live.recorded
      .then(() => this.ledger.transition(live.runId, patch, live.revision))
      .then(
        (stored) => {
          live.revision = stored.revision;
        },
        (error: unknown) => this.log.error({ err: error, runId: live.runId, patch: Object.keys(patch) }, 'run record not updated'),
      );
  }

  private settle(
    record: LiveRun,
    given: SubagentResult | undefined,
    error: unknown,
    resolve: (r: SubagentResult) => void,
    reject: (e: unknown) => void,
  ): void {
    if (record.checkpointed) {
      // The child goes on in the next daemon: its cancelled turn here is no outcome to report.
      reject(handedOver(record.runId));
      return;
    }
    if (error instanceof SubagentError && error.code === 'HANDED_OVER') {
      // Its owner took it to another member of a shared pool, which holds it now: this daemon
      // lets go of it (no outcome, no notice, no record of its own), and its waiters are told.
      clearTimeout(record.graceTimer);
      this.table.forget(record);
      this.log.info({ runId: record.runId }, 'run handed over to another member');
      reject(error);
      return;
    }
    record.settledAt = isoNow();
    if (record.state === 'running') record.state = 'settled';
    const base = { runId: record.runId, provider: record.provider, id: record.id, local: record.local };
    if (given) {
      const result = boundedResult(given, this.maxOutputBytes, record.host?.budget.truncated === true);
      record.result = result;
      resolve(result);
      this.record(record, { state: record.state, settledAt: record.settledAt, result, ...this.movedWorker(record) });
      this.emit(record, { kind: 'end', payload: { ...endEventOf(base, result), result } });
    } else {
      const message = error instanceof Error ? error.message : String(error);
      this.log.error({ err: error, runId: record.runId }, 'run failed with an infrastructure fault');
      reject(error instanceof Error ? error : new Error(message));
      const failure: SubagentResult = { output: [], stopReason: 'error', diagnostic: `infrastructure fault: ${message}` };
      this.record(record, { state: record.state, settledAt: record.settledAt, result: failure, ...this.movedWorker(record) });
      this.emit(record, { kind: 'end', payload: { ...base, stopReason: 'error', error: { message } } });
    }
    // The one line per run end an operator greps for (the start is logged in publish), written
    // once the end has its place: the log file's write then follows the owner's.
    this.runLines.info(
      {
        runId: record.runId,
        provider: record.provider,
        owner: record.owner.id,
        durationMs: Date.parse(record.settledAt) - Date.parse(record.startedAt),
        stopReason: given?.stopReason ?? 'error',
      },
      'run ended',
    );
  }

  /** A cluster run may have moved to another member since it was recorded (a takeover): the record follows. */
  private movedWorker(record: LiveRun): { worker?: LiveRun['worker'] } {
    const now = record.run?.worker;
    if (now === undefined || now.id === record.worker.id) return {};
    record.worker = now;
    return { worker: now };
  }

  /** The owner first, then lifecycle listeners; a throwing or rejecting listener is logged, never fatal. */
  private emit(record: LiveRun, event: LifecycleEvent, answer?: StartAnswer): void {
    this.deliver(record.runId, event.kind, () => (event.kind === 'start' ? record.owner.notifyStart(event.payload, answer) : record.owner.notifyEnd(event.payload)));
    for (const listener of this.listeners) this.deliver(record.runId, event.kind, () => listener(event));
  }

  private deliver(runId: string, kind: string, send: () => void | Promise<void>): void {
    try {
      const returned = send();
      if (returned instanceof Promise) returned.catch((error: unknown) => this.log.warn({ err: error, runId }, `subagent/${kind} listener rejected`));
    } catch (error) {
      this.log.warn({ err: error, runId }, `subagent/${kind} listener threw`);
    }
  }


  /**
   * Cancel if running, dispose the child, record `disposed` (unless the run is left to the next
   * daemon: checkpointed, kept by a drain, or a durable owner's at shutdown). Once per run.
   */
  dispose(record: LiveRun): Promise<void> {
    clearTimeout(record.graceTimer);
    record.disposing ??= (async () => {
      if (record.state === 'running') record.abort.abort(new SubagentError('ABORTED', 'the run was disposed'));
      this.table.cancelDescendants(record.runId);
      try {
        await record.run?.dispose();
        // A run disposed while running settles (aborted) first: record that before 'disposed'.
        await record.settled.catch(() => undefined);
      } finally {
        record.state = 'disposed';
        record.worker = record.run?.worker ?? record.worker;
        // A disposed child's session stays on disk; holding it in memory too would only grow.
        record.run = undefined;
        const keep = record.checkpointed || record.keptForNextDaemon || (this.shuttingDown() && record.owner.durable === true);
        if (!keep) this.record(record, { state: 'disposed' });
        this.table.disposed(record);
      }
    })();
    return record.disposing;
  }
}
