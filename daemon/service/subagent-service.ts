/**
 * The seam behind the wire, composed from its parts: it checks and admits starts, runs
 * providers, publishes and settles runs, and answers for them (wait, attach, cancel, dispose,
 * resume, list, inspect) to the connection that owns each one.
 *
 * The parts: run-ownership.ts (owners, run ids and tokens), run-table.ts (the runs held in
 * memory, the ownership check), run-start.ts (a start or a resumption, from its idempotency key
 * to its publication), run-hosting.ts (the RunHost per run and the order of a run's messages),
 * run-lifecycle.ts (publish, record, settle, notices, dispose), run-recovery.ts (a previous
 * daemon's runs, and checkpoints for the next one), and the RunLedger (store/run-ledger.ts),
 * where runs are recorded and admitted. The service does not know which ledger it runs on.
 *
 * Rules stated here:
 * - A connection that goes away leaves its runs detached for `detachGraceMs`; its token
 *   re-attaches them, else they are cancelled and disposed. Its pending starts are cancelled.
 * - A shutdown refuses new starts; a drain waits up to its timeout, then checkpoints what can be
 *   continued by the next daemon and disposes everything.
 */
import type { TokenBudgets } from '../upstream/token-budgets.js';
import type { Logger } from 'pino';
import {
  SubagentError,
  DEFAULT_MAX_OUTPUT_BYTES,
  type AttachResult,
  type ContentBlock,
  type InspectResult,
  type InterruptLevel,
  type RunState,
  type RunsListParams,
  type RunsListResult,
  type StartParams,
  type StartResult,
  type SubagentResult,
} from '../../protocol/index.js';
import { StartKeys, type StartKeyStore } from '../idempotency/start-keys.js';
import type { DaemonProvider } from '../provider.js';
import type { Lease, ListedRun, RunLedger, StoredRun } from '../store/run-ledger.js';
import { LineageSlots, type LineageSlotStats } from './lineage-slots.js';
import { ProviderRegistry } from './provider-registry.js';
import { OwnedRunHost } from './run-hosting.js';
import { DETACHED, EXECUTING_MEMBER, tokenMatches, type RunOwner } from './run-ownership.js';
import { RunLifecycle, type LifecycleListener } from './run-lifecycle.js';
import { RunRecovery } from './run-recovery.js';
import { RunStart, type ResumeExtras, type StartExtras } from './run-start.js';
import { RunTable, type LiveRun } from './run-table.js';
import { RunObservers, type RunObserver } from './run-observer.js';
import { liveInfo, runInfo, sessionOf, storedState } from './run-views.js';

export type { RunOwner, StartAnswer } from './run-ownership.js';
export { mintRunId } from './run-ownership.js';

export type { LifecycleListener } from './run-lifecycle.js';
export type { ObservedStart, RunObserver } from './run-observer.js';
export type { ResumeExtras, StartExtras } from './run-start.js';

export interface SubagentServiceOptions {
  /** Where runs are recorded and admitted (store/run-ledger.ts). */
  readonly ledger: RunLedger;
  /** How long a disconnected client's runs wait for it to re-attach before they are cancelled. */
  readonly detachGraceMs?: number;
  /** Cap on one run's output and, separately, on its event stream (default DEFAULT_MAX_OUTPUT_BYTES). */
  readonly maxOutputBytes?: number;
  /** Wraps every provider as it is registered (worktree isolation: daemon/worktrees/). */
  readonly decorateProvider?: (provider: DaemonProvider) => DaemonProvider;
  /** Token budgets of lineages and clients (daemon/upstream/token-budgets.ts); absent: none. */
  readonly budgets?: TokenBudgets;
  /** How long a start's idempotency key answers for its run (limits.idempotencyWindowMs, default 10 minutes). */
  readonly idempotencyWindowMs?: number;
  /** Where keyed starts are remembered (a cluster member: the pool's bucket); default: this daemon's memory. */
  readonly startKeys?: StartKeyStore;
}

export class SubagentService {
  readonly registry: ProviderRegistry;
  readonly ledger: RunLedger;
  private readonly table = new RunTable();
  /** Slots lent by parents to their nested children: the admission rule of lineages. */
  private readonly lineageSlots = new LineageSlots();
  private readonly recovery: RunRecovery;
  private readonly lifecycle: RunLifecycle;
  private readonly runStart: RunStart;
  private readonly detachGraceMs: number;
  private readonly maxOutputBytes: number;
  private shuttingDown = false;
  /** Telemetry and the web view (run-observer.ts); absent until the first observer. */
  private observers: RunObservers | undefined;

  constructor(
    private readonly log: Logger,
    options: SubagentServiceOptions,
  ) {
    this.ledger = options.ledger;
    this.registry = new ProviderRegistry(options.decorateProvider);
    this.detachGraceMs = options.detachGraceMs ?? 60_000;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    this.recovery = new RunRecovery(this.ledger, this.registry, log, this.maxOutputBytes);
    this.lifecycle = new RunLifecycle(this.ledger, this.table, log, this.maxOutputBytes, () => this.shuttingDown);
    this.runStart = new RunStart({
      registry: this.registry,
      ledger: this.ledger,
      table: this.table,
      lifecycle: this.lifecycle,
      lineageSlots: this.lineageSlots,
      startKeys: options.startKeys ?? new StartKeys(options.idempotencyWindowMs),
      budgets: options.budgets,
      log,
      maxOutputBytes: this.maxOutputBytes,
      observers: () => this.observers,
      shuttingDown: () => this.shuttingDown,
      attach: (runId, runToken, owner, stream) => this.attach(runId, runToken, owner, stream),
    });
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Observe every run's lifecycle (embedders, ops). Listener failures are logged and contained. */
  onLifecycle(listener: LifecycleListener): () => void {
    this.lifecycle.listeners.add(listener);
    return () => this.lifecycle.listeners.delete(listener);
  }

  /** Watch every run from its start to its end (daemon/telemetry/, daemon/ui/); see run-observer.ts. */
  observe(observer: RunObserver): () => void {
    if (!this.observers) {
      const observers = new RunObservers((error) => this.log.warn({ err: error }, 'a run observer threw; it is ignored from here on'));
      this.observers = observers;
      this.lifecycle.listeners.add((event) => {
        if (event.kind === 'end') observers.ended(event.payload);
      });
    }
    return this.observers.add(observer);
  }

  /** Runs a dead daemon left running or starting are recorded as interrupted (run-recovery.ts). */
  markInterrupted(): Promise<StoredRun[]> {
    return this.recovery.markInterrupted();
  }

  /** Continue the children a draining daemon checkpointed, detached until their owners re-attach. */
  continueCheckpointed(): Promise<string[]> {
    return this.recovery.continueCheckpointed(async (stored, run, host, abort, lease) => {
      await this.lifecycle.publish(stored.provider, run, DETACHED, abort, host, lease, undefined, { continues: stored, ...(stored.restore && { restore: stored.restore }) });
      this.startGrace(this.table.get(stored.runId)!);
    });
  }

  /**
   * `extras.parentRunId`: a child of this daemon delegates (see delegation.ts); cancelling that run
   * cancels this one. `extras.report`: the sink of a continuable child's `report` tool (children.ts).
   * `extras.answer`: the connection that answers this start (see StartAnswer). Its steps: run-start.ts.
   */
  start(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras = {}): Promise<StartResult> {
    return this.runStart.start(params, owner, cancel, extras);
  }

  /** `after-step` needs the provider's `interrupt`; without it the run stops `now`. */
  async cancel(runId: string, owner: RunOwner, level: InterruptLevel = 'now'): Promise<void> {
    const record = await this.table.owned(runId, owner, this.ledger);
    if (record.state !== 'running') return;
    if (level === 'after-step' && record.run?.interrupt) this.table.stopAfterStep(record);
    else {
      record.abort.abort(new SubagentError('ABORTED', 'the run was cancelled'));
      this.table.cancelDescendants(record.runId);
    }
  }

  /** An operator's cancel (`daemon/cancel`, the web view): done as the run's owner would. */
  async cancelAsOperator(runId: string, level: InterruptLevel = 'now'): Promise<void> {
    const owner = this.ownerOf(runId);
    if (!owner) throw new SubagentError('UNKNOWN_RUN', `no live run ${runId}`);
    await this.cancel(runId, owner, level);
  }

  /** The connection a live run belongs to now (nested starts and waits act as it). */
  ownerOf(runId: string): RunOwner | undefined {
    return this.table.get(runId)?.owner;
  }

  /**
   * Who a nested start of `parentRunId` belongs to: the parent's owner (also while the parent's
   * own start is still being answered: a pooled child may delegate in its first step), or, for a
   * parent this cluster member executes for another member's client, this member
   * (EXECUTING_MEMBER): the child runs here on the slot its parent lends it (daemon/cluster/lent-slots.ts).
   */
  delegatorOf(parentRunId: string): RunOwner | undefined {
    return this.ownerOf(parentRunId) ?? this.table.starting.get(parentRunId)?.owner ?? (this.ledger.executesHere?.(parentRunId) ? EXECUTING_MEMBER : undefined);
  }

  async dispose(runId: string, owner: RunOwner): Promise<void> {
    return this.lifecycle.dispose(await this.table.owned(runId, owner, this.ledger));
  }

  async sendMessage(runId: string, owner: RunOwner, content: ContentBlock[]): Promise<void> {
    const record = await this.table.owned(runId, owner, this.ledger);
    const send = record.run?.sendMessage;
    if (!send) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support sendMessage`);
    if (record.state !== 'running') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}, not running`);
    await send.call(record.run, content);
  }

  /**
   * Continue a settled child with `prompt` as a new run of it. `report`: a continuable child's
   * report sink, for a child that must first be restored (children.ts); `answer` as for start;
   * `traceparent`: the caller's trace context, which the continuation's spans continue.
   */
  async resume(runId: string, owner: RunOwner, prompt: ContentBlock[], stream: boolean, extras: ResumeExtras = {}): Promise<StartResult> {
    const record = await this.table.owned(runId, owner, this.ledger);
    if (!record.run) await this.recovery.restore(record, owner, stream, extras.report);
    return this.runStart.resume(record, owner, prompt, stream, extras);
  }

  async wait(runId: string, owner: RunOwner): Promise<SubagentResult> {
    return (await this.table.owned(runId, owner, this.ledger)).settled;
  }

  /**
   * Take ownership of a run with its token: a run detached by a closed connection (within the
   * grace period), or one a previous daemon ran (its recorded outcome).
   */
  async attach(runId: string, runToken: string, owner: RunOwner, stream?: boolean): Promise<AttachResult> {
    const record = this.table.get(runId) ?? (await this.adoptFromLedger(runId, runToken));
    if (!record || !tokenMatches(runToken, record.tokenHash)) {
      // One answer for both: an id without its token reveals nothing.
      throw new SubagentError('NOT_OWNER', `no run ${runId} with that token`, { field: '/runToken' });
    }
    clearTimeout(record.graceTimer);
    record.owner = owner;
    if (record.host) {
      record.host.owner = owner;
      if (stream !== undefined) record.host.stream = stream;
    }
    return { run: liveInfo(record, owner), ...(record.result && { result: record.result }) };
  }

  /**
   * A run this daemon does not hold, for the holder of its token: one executing on another member
   * of a shared ledger is taken over live (its events come here from then on); any other is
   * adopted as recorded.
   */
  private async adoptFromLedger(runId: string, runToken: string): Promise<LiveRun | undefined> {
    let stored = await this.ledger.get(runId);
    // Nothing moves for a wrong token: the caller answers NOT_OWNER as for an unknown id.
    if (!stored || !tokenMatches(runToken, stored.tokenHash)) return undefined;
    // Another attach may have adopted it while this one read the ledger.
    if (this.table.get(runId)) return this.table.get(runId);
    if (stored.state === 'running' && this.ledger.adopt) {
      const live = await this.adoptRunning(runId, stored);
      if (live) return live;
      stored = (await this.ledger.get(runId)) ?? stored; // it ended meanwhile: its outcome is recorded
    }
    if (this.table.get(runId)) return this.table.get(runId);
    const result = stored.result ?? { output: [], stopReason: 'error', diagnostic: 'the run left no recorded outcome' };
    const record: LiveRun = {
      runId,
      provider: stored.provider,
      id: stored.id,
      local: false,
      owner: DETACHED,
      tokenHash: stored.tokenHash,
      run: undefined,
      abort: new AbortController(),
      host: undefined,
      startedAt: stored.startedAt,
      worker: stored.worker,
      state: storedState(stored),
      settledAt: stored.settledAt ?? stored.startedAt,
      result,
      settled: Promise.resolve(result),
      revision: stored.revision,
      recorded: Promise.resolve(),
    };
    this.table.add(record);
    return record;
  }

  /** Publishes, detached, a run that executes on another member, as the ledger hands it over. */
  private async adoptRunning(runId: string, stored: StoredRun): Promise<LiveRun | undefined> {
    const abort = new AbortController();
    const host = new OwnedRunHost(runId, DETACHED, false, this.log, stored.provider, this.maxOutputBytes);
    const taken = await this.ledger.adopt!(runId, host, abort.signal);
    if (!taken) return undefined;
    // Its slot is the executing member's: nothing is admitted here.
    await this.lifecycle.publish(stored.provider, taken.run, DETACHED, abort, host, NO_LEASE, undefined, {
      continues: taken.stored,
      ...(taken.stored.restore && { restore: taken.stored.restore }),
      ...(taken.stored.parentRunId !== undefined && { parentRunId: taken.stored.parentRunId }),
    });
    return this.table.get(runId);
  }

  /** Runs of this daemon and of the ones before it, newest first, a page at a time (store/run-paging.ts). */
  list(asker: RunOwner, params: RunsListParams = {}): Promise<RunsListResult> {
    // Every run has a ledger record from its start on; the live record, when there is one, is the truth.
    return this.ledger.page(params, (stored): ListedRun => {
      const live = this.table.get(stored.runId);
      if (live) {
        return { runId: live.runId, state: live.state, provider: live.provider, startedAt: live.startedAt, mine: live.owner === asker, info: () => liveInfo(live, asker) };
      }
      const state = storedState(stored);
      return { runId: stored.runId, state, provider: stored.provider, startedAt: stored.startedAt, mine: false, info: () => runInfo(stored, state, false) };
    });
  }

  /** The child (session) id of a run, live or stored: where its session log is. */
  async childIdOf(runId: string): Promise<string> {
    const id = this.table.get(runId)?.id ?? (await this.ledger.get(runId))?.id;
    if (id === undefined) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
    return id;
  }

  /** Anyone may see a run's record; its session (prompts, tool arguments) only its owner, or the token's holder. */
  async inspect(runId: string, asker: RunOwner, runToken?: string): Promise<InspectResult> {
    const record = this.table.get(runId);
    if (!record) {
      const stored = await this.ledger.get(runId);
      if (!stored) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
      return { run: runInfo(stored, storedState(stored), false) };
    }
    const entitled = record.owner === asker || (runToken !== undefined && tokenMatches(runToken, record.tokenHash));
    const session = entitled ? sessionOf(record.run?.localAgent) : undefined;
    return session ? { run: liveInfo(record, asker), header: session.header, events: [...session.events] } : { run: liveInfo(record, asker) };
  }

  /** How many runs hold a slot lent by their parent, and how many nested starts wait for one. */
  lineageAdmission(): LineageSlotStats {
    return this.lineageSlots.stats();
  }

  counts(): Record<RunState, number> {
    return this.table.counts();
  }

  /** Whether any run still works or waits to start (idle shutdown waits for none). */
  get busy(): boolean {
    return this.table.busy;
  }

  /**
   * A connection went away: cancel its pending starts (they have no token yet); detach its runs
   * for the grace period, after which they are cancelled and disposed unless re-attached.
   */
  ownerGone(owner: RunOwner): Promise<void> {
    for (const pending of this.table.starting.values()) {
      if (pending.owner === owner) pending.abort.abort(new SubagentError('ABORTED', 'the client disconnected'));
    }
    const mine = [...this.table.values()].filter((record) => record.owner === owner);
    for (const record of mine) {
      record.owner = DETACHED;
      if (record.host) record.host.owner = DETACHED;
    }
    if (this.detachGraceMs === 0) return Promise.allSettled(mine.map((r) => this.lifecycle.dispose(r))).then(() => undefined);
    for (const record of mine) if (record.state !== 'disposed') this.startGrace(record);
    return Promise.resolve();
  }

  /** Give a detached run the grace period to be re-attached, then cancel and dispose it. */
  private startGrace(record: LiveRun): void {
    clearTimeout(record.graceTimer);
    record.graceTimer = setTimeout(() => {
      if (record.owner !== DETACHED) return;
      this.log.info({ runId: record.runId }, 'detached run was not re-attached in time: disposing it');
      void this.lifecycle.dispose(record);
    }, this.detachGraceMs);
    record.graceTimer.unref();
  }

  /**
   * Refuse new starts; with `drain`, let running children finish up to the timeout, then
   * checkpoint those the next daemon can continue (run-recovery.ts) and dispose all. A drain
   * also leaves settled, undisposed children of such providers resumable by their owners.
   */
  async shutdown(drain: boolean, timeoutMs: number): Promise<void> {
    this.shuttingDown = true;
    for (const pending of this.table.starting.values()) pending.abort.abort(new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down'));
    const running = [...this.table.values()].filter((record) => record.state === 'running');
    if (drain && running.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([Promise.allSettled(running.map((r) => r.settled)), timeout]);
      clearTimeout(timer);
      this.recovery.checkpoint(running, (record, patch) => this.lifecycle.record(record, patch));
    }
    if (drain) {
      for (const record of this.table.values()) if (this.recovery.keepsForNextDaemon(record)) record.keptForNextDaemon = true;
    }
    const all = [...this.table.values()];
    await Promise.allSettled(all.map((record) => this.lifecycle.dispose(record)));
    await Promise.allSettled(all.map((record) => record.recorded));
    await this.ledger.close();
  }
}

const NO_LEASE: Lease = { release: () => undefined };
