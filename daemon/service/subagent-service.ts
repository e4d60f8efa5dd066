/**
 * Why this file is long: it is the one place where a start's steps meet in order (checks,
 * idempotency key, admission or a lent lineage slot, provider, publish, observers), and each step's
 * rule lives in the module named above. The start path is the piece to move into its own module
 * (run-start.ts) next.
 *
 * The seam behind the wire, composed from its parts: it checks and admits starts, runs
 * providers, publishes and settles runs, and answers for them (wait, attach, cancel, dispose,
 * resume, list, inspect) to the connection that owns each one.
 *
 * The parts: run-ownership.ts (owners, run ids and tokens), run-table.ts (the runs held in
 * memory, the ownership check), run-hosting.ts (the RunHost per run and the order of a run's
 * messages), run-lifecycle.ts (publish, record, settle, notices, dispose), run-recovery.ts (a
 * previous daemon's runs, and checkpoints for the next one), and the RunLedger
 * (store/run-ledger.ts), where runs are recorded and admitted. The service does not know which
 * ledger it runs on.
 *
 * Rules stated here:
 * - Start checks run in the seam's order (start-checks.ts), before a slot is taken; a start
 *   cancelled before its child is ready is ABORTED, and a child ready too late is disposed.
 * - A resumption is a new run of the same child, admitted like a start.
 * - A start with an idempotency key is made once per parent session and key within the window
 *   (idempotency/start-keys.ts); a repeat answers the same run, attached to the asking connection.
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
  endEventOf,
  type AttachResult,
  type ContentBlock,
  type InspectResult,
  type InterruptLevel,
  type RunState,
  type RunsListParams,
  type RunsListResult,
  type StartParams,
  type StartProgress,
  type StartResult,
  type SubagentResult,
} from '../../protocol/index.js';
import { StartKeys, type KeyedRun, type StartKeyStore } from '../idempotency/start-keys.js';
import type { DaemonProvider, DaemonRun, IsolationRequest, ProviderStartRequest, RunHost } from '../provider.js';
import type { Lease, ListedRun, RunLedger, StoredRun } from '../store/run-ledger.js';
import { LineageSlots, type LineageSlotStats } from './lineage-slots.js';
import { ProviderRegistry } from './provider-registry.js';
import { checkStartRequest, childDepth } from './start-checks.js';
import { OwnedRunHost } from './run-hosting.js';
import { DETACHED, EXECUTING_MEMBER, mintRunId, mintToken, tokenMatches, type MintedToken, type RunOwner, type StartAnswer } from './run-ownership.js';
import { RunLifecycle, type LifecycleListener } from './run-lifecycle.js';
import { RunRecovery } from './run-recovery.js';
import { RunTable, type LiveRun } from './run-table.js';
import { RunObservers, type RunObserver } from './run-observer.js';
import { liveInfo, runInfo, sessionOf, storedState } from './run-views.js';

export type { RunOwner, StartAnswer } from './run-ownership.js';
export { mintRunId } from './run-ownership.js';

export type { LifecycleListener } from './run-lifecycle.js';
export type { ObservedStart, RunObserver } from './run-observer.js';

export interface StartExtras {
  readonly parentRunId?: string;
  readonly report?: ProviderStartRequest['report'];
  /** How the run is handed to its owner, when that happens after start returns (a connection's reply). */
  readonly answer?: StartAnswer;
  /** Where the start stands until it is answered: queue position, provider start, ready. */
  readonly progress?: (value: StartProgress) => void;
  /** The caller's W3C trace context when the start params carry none (child/start, a face's `_meta`). */
  readonly traceparent?: string;
}

/** What a resume may carry besides its prompt: as StartExtras, for a continuation. */
export type ResumeExtras = Pick<StartExtras, 'report' | 'answer' | 'traceparent'>;

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
  private readonly detachGraceMs: number;
  private readonly maxOutputBytes: number;
  private readonly budgets: TokenBudgets | undefined;
  /** Keyed starts of the last window (idempotency/start-keys.ts). */
  private readonly startKeys: StartKeyStore;
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
    this.budgets = options.budgets;
    this.startKeys = options.startKeys ?? new StartKeys(options.idempotencyWindowMs);
    this.recovery = new RunRecovery(this.ledger, this.registry, log, this.maxOutputBytes);
    this.lifecycle = new RunLifecycle(this.ledger, this.table, log, this.maxOutputBytes, () => this.shuttingDown);
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
   * `extras.answer`: the connection that answers this start (see StartAnswer).
   */
  async start(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras = {}): Promise<StartResult> {
    if (params.idempotencyKey === undefined) return this.startAfresh(params, owner, cancel, extras);
    const token = mintToken();
    const claimed = this.startKeys.claim(params.parent.sessionId, params.idempotencyKey, mintRunId(), cancel, token.token);
    // This daemon's own store answers a new key at once: no turn of the event loop for it.
    const claim = claimed instanceof Promise ? await claimed : claimed;
    if ('run' in claim) return this.startAgain(claim.run, owner, params.stream === true, extras.answer);
    try {
      const started = await this.startAfresh(params, owner, cancel, extras, claim.runId, token);
      claim.first({ runId: started.runId, runToken: started.runToken });
      return started;
    } catch (error) {
      claim.first(undefined);
      throw error;
    }
  }

  /**
   * A start repeated under its key: the run the first one made, attached to `owner` as by its
   * token. A run that settled meanwhile has its end notice sent again, after the answer: the
   * owner it had then may never have been told.
   */
  private async startAgain(keyed: KeyedRun, owner: RunOwner, stream: boolean, answer: StartAnswer | undefined): Promise<StartResult> {
    const { result } = await this.attach(keyed.runId, keyed.runToken, owner, stream);
    const record = this.table.get(keyed.runId)!;
    const identity = { runId: record.runId, provider: record.provider, id: record.id, local: record.local };
    if (result) {
      const end = { ...endEventOf(identity, result), result };
      if (answer) answer.whenSent(identity.runId, () => owner.notifyEnd(end));
      else owner.notifyEnd(end);
    }
    return { ...identity, runToken: keyed.runToken };
  }

  private async startAfresh(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras, runId = mintRunId(), token?: MintedToken): Promise<StartResult> {
    const { progress } = extras;
    if (this.shuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    const provider = this.registry.get(params.provider);
    if (!provider) {
      throw new SubagentError('NO_PROVIDER', `no provider named "${params.provider}" (have: ${this.registry.list().join(', ') || 'none'})`, {
        field: '/provider',
      });
    }
    checkStartRequest(provider, params);
    const depth = childDepth(params.parent, params.maxDepth);
    const abort = new AbortController();
    // The start's cancel rolls it back until its answer is decided (publish's `accept`), never later.
    let answering = false;
    const onCancel = (): void => {
      if (!answering) abort.abort(new SubagentError('ABORTED', 'start was cancelled before the child was ready'));
    };
    if (cancel.aborted) onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    const stopListening = (): void => cancel.removeEventListener('abort', onCancel);
    const host = new OwnedRunHost(runId, owner, params.stream === true, this.log, provider.name, this.maxOutputBytes);
    const traceparent = params.traceparent ?? extras.traceparent;
    const observers = this.observers;
    host.observers = observers;
    observers?.starting({
      runId,
      provider: provider.name,
      depth,
      connectionId: owner.id,
      ...(params.label !== undefined && { label: params.label }),
      ...(typeof params.agentOptions?.['model'] === 'string' && { model: params.agentOptions['model'] }),
      ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }),
      ...(owner.clientName !== undefined && { client: owner.clientName }),
      ...(traceparent !== undefined && { traceparent }),
    });
    // A nested start belongs to its parent run's lineage; a client's own start roots a new one.
    const parentRequester = extras.parentRunId !== undefined ? this.table.get(extras.parentRunId)?.host?.requester : undefined;
    host.requester = parentRequester ?? { client: owner.id, lineage: runId };
    if (this.budgets) {
      // A client's own start is refused once its day's tokens are spent; nested starts belong to a started lineage.
      if (parentRequester === undefined) this.budgets.checkStart(owner.clientName);
      host.tokenBudget = this.budgets.forRun(host.requester.lineage, owner.clientName);
    }
    this.table.starting.set(runId, { owner, abort });
    const told = startProgressTeller(host, extras.progress);
    let run: DaemonRun;
    let lease: Lease | undefined;
    try {
      this.ledger.assertRecordable(); // a run the ledger cannot hold would be lost at a restart
      const queuedAt = observers && monotonicMs();
      // A nested start runs on its parent's slot (lineage-slots.ts); a root start waits its fair turn.
      lease =
        extras.parentRunId !== undefined
          ? await this.lineageSlots.borrow(extras.parentRunId, abort.signal)
          : await this.ledger.admit(owner.id, provider.name, abort.signal, told && ((position) => told({ kind: 'queued', position })));
      if (queuedAt !== undefined) observers?.admitted(runId, monotonicMs() - queuedAt);
      told?.({ kind: 'starting' });
      run = await provider.start({
        ...toProviderRequest(params, depth, abort.signal, host),
        ...(extras.report && { report: extras.report }),
        ...(told && { progress: told }),
        ...(traceparent !== undefined && { traceparent }),
        ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }),
      });
    } catch (error) {
      stopListening();
      lease?.release();
      const failure = this.startFailure(error, abort.signal, provider.name);
      observers?.startFailed(runId, failure.code);
      throw failure;
    } finally {
      this.table.starting.delete(runId);
    }
    if (abort.signal.aborted || !owner.open) {
      stopListening();
      // Ready too late: the caller already gave up, so the run is never published.
      await run.dispose().catch((error: unknown) => this.log.warn({ err: error, runId }, 'dispose after late readiness failed'));
      lease.release();
      observers?.startFailed(runId, 'ABORTED');
      throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    }
    const restore = {
      ...(params.persona !== undefined && { persona: params.persona }),
      ...(params.toolFilter && { toolFilter: params.toolFilter }),
      // The lineage's depth cap, for a restored child's nested delegation.
      ...(params.maxDepth !== undefined && { maxDepth: params.maxDepth }),
    };
    // A cancel read while the run's record is written still rolls the start back: publish asks
    // (after the write, before any lifecycle event) and from then on the run's cancel is its own.
    const accept = (): boolean => {
      answering = true;
      stopListening();
      return !abort.signal.aborted && owner.open;
    };
    let started: StartResult;
    try {
      started = await this.lifecycle.publish(
        provider.name,
        run,
        owner,
        abort,
        host,
        lease,
        extras.answer,
        { restore, ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }), ...(token && { token }) },
        accept,
      );
    } catch (error) {
      if (error instanceof SubagentError && error.code === 'ABORTED') observers?.startFailed(runId, 'ABORTED');
      throw error;
    } finally {
      stopListening();
    }
    observers?.ready(started.runId, { id: started.id });
    // Started by a run already told to stop after its step: this one gets the same level.
    const parentRun = extras.parentRunId !== undefined ? this.table.get(extras.parentRunId) : undefined;
    const published = this.table.get(started.runId);
    if (parentRun?.stopsAfterStep && published?.state === 'running') this.table.stopAfterStep(published);
    progress?.({ kind: 'ready', runId: started.runId });
    return started;
  }

  private startFailure(error: unknown, signal: AbortSignal, provider: string): SubagentError {
    if (error instanceof SubagentError) return error;
    if (signal.aborted) return new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    this.log.warn({ err: error, provider }, 'provider failed to start a child');
    return new SubagentError('START_FAILED', `provider "${provider}" failed to start: ${error instanceof Error ? error.message : String(error)}`);
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
    const { report, answer, traceparent } = extras;
    const record = await this.table.owned(runId, owner, this.ledger);
    if (!record.run) await this.recovery.restore(record, owner, stream, report);
    if (!record.run) throw new SubagentError('RUN_STATE', `run ${runId} has no live child`);
    const resume = record.run.resume;
    if (!resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support resume`);
    if (this.shuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    if (record.state !== 'settled') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}; only a settled run can be resumed`);
    const host = record.host!;
    // One turn at a time per child: re-arming the host of a chain whose later run still works
    // would hold that run's settle for an answer that never comes.
    for (const other of this.table.values()) {
      if (other.host === host && other.state === 'running') throw new SubagentError('RUN_STATE', `child ${record.id} is already running a continuation (run ${other.runId})`);
    }
    const abort = new AbortController();
    const lease = await this.ledger.admit(owner.id, record.provider, abort.signal);
    // The provider keeps the chain's first host for its whole life: point it at the new run
    // before the child can emit anything for it.
    host.rearm(mintRunId(), owner, stream);
    const observers = (host.observers = this.observers);
    observers?.starting({
      runId: host.runId,
      provider: record.provider,
      depth: 1,
      connectionId: owner.id,
      resumedFrom: record.runId,
      ...(record.parentRunId !== undefined && { parentRunId: record.parentRunId }),
      ...(owner.clientName !== undefined && { client: owner.clientName }),
      ...(traceparent !== undefined && { traceparent }),
    });
    let next: DaemonRun;
    try {
      next = await resume.call(record.run, prompt, { signal: abort.signal, ...(traceparent !== undefined && { traceparent }) });
    } catch (error) {
      lease.release();
      observers?.startFailed(host.runId, error instanceof SubagentError ? error.code : 'START_FAILED');
      throw error;
    }
    const restore = (await this.ledger.get(record.runId))?.restore;
    const started = await this.lifecycle.publish(record.provider, next, owner, abort, host, lease, answer, { resumedFrom: record.runId, ...(restore && { restore }) });
    observers?.ready(started.runId, { id: started.id });
    return started;
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

function toProviderRequest(params: StartParams, depth: number, signal: AbortSignal, host: RunHost): ProviderStartRequest {
  const isolation = isolationOf(params);
  return {
    prompt: params.prompt,
    parent: params.parent,
    childDepth: depth,
    signal,
    host,
    ...(params.agentOptions !== undefined && { agentOptions: params.agentOptions }),
    ...(params.outputSchema !== undefined && { outputSchema: params.outputSchema }),
    ...(params.maxDepth !== undefined && { maxDepth: params.maxDepth }),
    ...(params.toolFilter !== undefined && { toolFilter: params.toolFilter }),
    ...(params.persona !== undefined && { persona: params.persona }),
    ...(params.tools !== undefined && { tools: params.tools }),
    ...(params.env !== undefined && { env: params.env }),
    ...(params.label !== undefined && { label: params.label }),
    ...(isolation && { isolation }),
  };
}

/** The start's worktree isolation fields, when it has any. */
function isolationOf(params: StartParams): IsolationRequest | undefined {
  if (params.isolation === undefined && params.baseRef === undefined && params.includeUncommitted === undefined && params.cleanup === undefined) return undefined;
  return {
    ...(params.isolation !== undefined && { isolation: params.isolation }),
    ...(params.baseRef !== undefined && { baseRef: params.baseRef }),
    ...(params.includeUncommitted !== undefined && { includeUncommitted: params.includeUncommitted }),
    ...(params.cleanup !== undefined && { cleanup: params.cleanup }),
  };
}

/** Not `performance.now()`: that global loads node:perf_hooks at start (ops/idle-memory.ts). */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

const NO_LEASE: Lease = { release: () => undefined };

/**
 * Where a start stands, told twice: as the start's `$/progress` (when it gave a token) and as the
 * run's own `queued`/`agent-starting` events (when it streams), which the host holds until the
 * answer that names the run and then sends first, in order. Undefined when nobody listens.
 */
function startProgressTeller(host: OwnedRunHost, progress: StartExtras['progress']): StartExtras['progress'] {
  if (!host.stream) return progress;
  return (value) => {
    progress?.(value);
    if (value.kind === 'queued') host.emit({ kind: 'queued', position: value.position });
    else if (value.kind === 'agent') host.emit({ kind: 'agent-starting', stage: value.stage });
  };
}
