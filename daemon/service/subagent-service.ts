/**
 * The seam behind the wire: validates starts, runs providers, owns the run table, routes
 * lifecycle events to the connection that owns each run, and enforces ownership. Ownership is
 * proven by a run token handed to the starter: a connection that goes away leaves its runs
 * detached for a grace period, during which the token re-attaches them; the run index keeps what
 * a restarted daemon needs to answer for runs it did not run itself.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import {
  SubagentError,
  DEFAULT_MAX_OUTPUT_BYTES,
  type AttachResult,
  type ContentBlock,
  type EndParams,
  type InspectResult,
  type InterruptLevel,
  type PermissionParams,
  type PermissionResult,
  type RunEvent,
  type RunEventParams,
  type RunInfo,
  type RunState,
  type RunsListParams,
  type RunsListResult,
  type SessionEvent,
  type SessionHeader,
  type StartParams,
  type StartProgress,
  type StartResult,
  type SubagentResult,
  type SubagentStartEvent,
  type ToolCallParams,
  type ToolCallResult,
} from '../../protocol/index.js';
import type { DaemonRun, ProviderStartRequest, RunHost } from '../provider.js';
import type { Lease, ListedRun, RunLedger, RunPatch, StoredRun } from '../store/run-ledger.js';
import { ProviderRegistry } from './provider-registry.js';
import { boundedResult, StreamBudget } from './output-budget.js';
import { checkStartRequest, childDepth } from './start-checks.js';

/** The connection a run belongs to, as the service sees it. */
export interface RunOwner {
  readonly id: string;
  readonly open: boolean;
  /** Its runs stay resumable in the run index across a daemon shutdown (continuable children). */
  readonly durable?: boolean;
  notifyStart(event: SubagentStartEvent): void;
  notifyEnd(event: EndParams): void;
  notifyRunEvent(event: RunEventParams): void;
  callTool(params: ToolCallParams, signal: AbortSignal): Promise<ToolCallResult>;
  askPermission(params: PermissionParams, signal: AbortSignal): Promise<PermissionResult>;
}

/** Stands in for a connection that went away: nothing is delivered, tools fail, prompts are cancelled. */
const DETACHED: RunOwner = {
  id: 'detached',
  open: false,
  notifyStart: () => undefined,
  notifyEnd: () => undefined,
  notifyRunEvent: () => undefined,
  callTool: () => Promise.reject(new Error('the client that hosts this tool has disconnected')),
  askPermission: () => Promise.resolve({ outcome: 'cancelled' }),
};

export type LifecycleListener = (
  event: { kind: 'start'; payload: SubagentStartEvent } | { kind: 'end'; payload: EndParams },
) => void | Promise<void>;

export interface StartExtras {
  readonly parentRunId?: string;
  readonly report?: ProviderStartRequest['report'];
  /** Where the start stands until it is answered: queue position, provider start, ready. */
  readonly progress?: (value: StartProgress) => void;
}

export interface SubagentServiceOptions {
  /** Where runs are recorded and admitted (store/run-ledger.ts). */
  readonly ledger: RunLedger;
  /** How long a disconnected client's runs wait for it to re-attach before they are cancelled. */
  readonly detachGraceMs?: number;
  /** Cap on one run's output and, separately, on its event stream (default DEFAULT_MAX_OUTPUT_BYTES). */
  readonly maxOutputBytes?: number;
}

/** A run this daemon holds in memory: live, or adopted from the ledger by an attach. */
interface LiveRun {
  readonly runId: string;
  /** The run whose child started this one (nested delegation inside the daemon). */
  readonly parentRunId?: string;
  readonly provider: string;
  readonly id: string;
  readonly local: boolean;
  owner: RunOwner;
  readonly tokenHash: string;
  /** Undefined for a run known only from the index (a previous daemon ran it) until restored. */
  run: DaemonRun | undefined;
  /** Cancels this run (and, before readiness, its start). */
  readonly abort: AbortController;
  host: ServiceRunHost | undefined;
  readonly startedAt: string;
  state: RunState;
  settledAt?: string;
  result?: SubagentResult;
  readonly settled: Promise<SubagentResult>;
  disposing?: Promise<void>;
  /** Stopped at a drain's timeout to be continued by the next daemon: its end is not this daemon's to report. */
  checkpointed?: boolean;
  /** Settled, undisposed, and left `settled` in the index by a drain: its owner may resume it under the next daemon. */
  keptForNextDaemon?: boolean;
  graceTimer?: NodeJS.Timeout;
  /** The ledger record's revision as last written, and the chain that writes its transitions in order. */
  revision: number;
  recorded: Promise<void>;
}

/** What a continued child is told: it was stopped at a step boundary and its log is intact. */
const CONTINUE_PROMPT =
  'The service running you was restarted while you worked; your earlier steps are above. Continue the task from where you stopped.';

/** How many disposed runs stay answerable in memory to run/wait and run/inspect. */
const DISPOSED_RETENTION = 1000;

/** Random bytes drawn from a pooled buffer: one kernel call per few hundred ids, not two per run. */
let pool = Buffer.alloc(0);
function random(n: number): Buffer {
  if (pool.length < n) pool = randomBytes(4096);
  const out = pool.subarray(0, n);
  pool = pool.subarray(n);
  return out;
}

/** Unguessable run ids and tokens: 144 and 192 random bits. */
export function mintRunId(): string {
  return `run_${random(18).toString('base64url')}`;
}
const mintToken = (): string => random(24).toString('base64url');
const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');
function tokenMatches(token: string, hash: string): boolean {
  return timingSafeEqual(Buffer.from(hashToken(token), 'hex'), Buffer.from(hash, 'hex'));
}

class ServiceRunHost implements RunHost {
  /** This run's share of the event stream; a resume gets a fresh one. */
  budget: StreamBudget;
  private runLog: Logger | undefined;

  constructor(
    public runId: string,
    public owner: RunOwner,
    public stream: boolean,
    private readonly serviceLog: Logger,
    private readonly provider: string,
    readonly maxOutputBytes: number,
  ) {
    this.budget = new StreamBudget(maxOutputBytes);
  }

  /** Made on first use: most runs never log, and a pino child per start is measurable. */
  get log(): Logger {
    return (this.runLog ??= this.serviceLog.child({ runId: this.runId, provider: this.provider }));
  }

  callTool(call: { callId: string; name: string; arguments: unknown }, signal: AbortSignal): Promise<ToolCallResult> {
    if (!this.owner.open) return Promise.reject(new Error('the client that hosts this tool has disconnected'));
    return this.owner.callTool({ runId: this.runId, ...call }, signal);
  }

  askPermission(request: Omit<PermissionParams, 'runId'>, signal: AbortSignal): Promise<PermissionResult> {
    if (!this.owner.open) return Promise.resolve({ outcome: 'cancelled' });
    return this.owner.askPermission({ runId: this.runId, ...request }, signal);
  }

  emit(event: RunEvent): void {
    if (!this.stream || !this.owner.open) return;
    const admitted = this.budget.admit(event);
    if (admitted) this.owner.notifyRunEvent({ runId: this.runId, event: admitted });
  }
}

export class SubagentService {
  readonly registry = new ProviderRegistry();
  readonly ledger: RunLedger;
  private readonly runs = new Map<string, LiveRun>();
  /** The runs with a parent run (nested delegation): what a cancel or dispose scans, not every run. */
  private readonly nested = new Set<LiveRun>();
  private readonly starting = new Map<string, { owner: RunOwner; abort: AbortController }>();
  private readonly listeners = new Set<LifecycleListener>();
  private readonly detachGraceMs: number;
  private readonly maxOutputBytes: number;
  private disposedCount = 0;
  private shuttingDown = false;

  constructor(
    private readonly log: Logger,
    options: SubagentServiceOptions,
  ) {
    this.ledger = options.ledger;
    this.detachGraceMs = options.detachGraceMs ?? 60_000;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Observe every run's lifecycle (embedders, ops). Listener failures are logged and contained. */
  onLifecycle(listener: LifecycleListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Runs a previous daemon left unsettled died with it: record them as settled `error` with a
   * reason, so their owners learn it via run/wait and ops never see them as running.
   */
  async markInterrupted(): Promise<StoredRun[]> {
    const interrupted: StoredRun[] = [];
    for (const run of await this.ledger.leftBehind()) {
      if (run.state !== 'running' && run.state !== 'starting') continue;
      const result: SubagentResult = {
        output: [],
        stopReason: 'error',
        diagnostic: `interrupted: the daemon that ran this child (pid ${run.worker.pid}) stopped before it settled; its session log is intact up to the last flushed turn`,
      };
      interrupted.push(await this.ledger.transition(run.runId, { state: 'settled', result, settledAt: new Date().toISOString() }, run.revision));
    }
    return interrupted;
  }

  /**
   * `extras.parentRunId`: a child of this daemon delegates (see delegation.ts); cancelling that run
   * cancels this one. `extras.report`: the sink of a continuable child's `report` tool (children.ts).
   */
  async start(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras = {}): Promise<StartResult> {
    const { parentRunId, progress } = extras;
    if (this.shuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    const provider = this.registry.get(params.provider);
    if (!provider) {
      throw new SubagentError('NO_PROVIDER', `no provider named "${params.provider}" (have: ${this.registry.list().join(', ') || 'none'})`, {
        field: '/provider',
      });
    }
    checkStartRequest(provider, params);
    const depth = childDepth(params.parent, params.maxDepth);
    const runId = mintRunId();
    const abort = new AbortController();
    const onCancel = (): void => abort.abort(new SubagentError('ABORTED', 'start was cancelled before the child was ready'));
    if (cancel.aborted) onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    const host = new ServiceRunHost(runId, owner, params.stream === true, this.log, provider.name, this.maxOutputBytes);
    this.starting.set(runId, { owner, abort });
    let run: DaemonRun;
    let lease: Lease | undefined;
    try {
      this.ledger.assertRecordable(); // a run the ledger cannot hold would be lost at a restart
      lease = await this.ledger.admit(owner.id, provider.name, abort.signal, progress && ((position) => progress({ kind: 'queued', position })));
      progress?.({ kind: 'starting' });
      run = await provider.start({ ...toProviderRequest(params, depth, abort.signal, host), ...(extras.report && { report: extras.report }), ...(progress && { progress }) });
    } catch (error) {
      lease?.release();
      throw this.startFailure(error, abort.signal, provider.name);
    } finally {
      cancel.removeEventListener('abort', onCancel);
      this.starting.delete(runId);
    }
    if (abort.signal.aborted || !owner.open) {
      // Ready too late: the caller already gave up, so the run is never published.
      await run.dispose().catch((error: unknown) => this.log.warn({ err: error, runId }, 'dispose after late readiness failed'));
      lease.release();
      throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    }
    const restore = {
      ...(params.persona !== undefined && { persona: params.persona }),
      ...(params.toolFilter && { toolFilter: params.toolFilter }),
      // The lineage's depth cap, for a restored child's nested delegation.
      ...(params.maxDepth !== undefined && { maxDepth: params.maxDepth }),
    };
    const started = await this.publish(provider.name, run, owner, abort, host, lease, { restore, ...(parentRunId !== undefined && { parentRunId }) });
    progress?.({ kind: 'ready', runId: started.runId });
    return started;
  }

  /**
   * Publish a ready run: record it (its first record is in before its starter holds the token),
   * observe its result, announce it. `continues`: a checkpointed run taken over under its old id
   * and token.
   */
  private async publish(
    provider: string,
    run: DaemonRun,
    owner: RunOwner,
    abort: AbortController,
    host: ServiceRunHost,
    lease: Lease,
    lineage: { resumedFrom?: string; restore?: StoredRun['restore']; continues?: StoredRun; parentRunId?: string } = {},
  ): Promise<StartResult> {
    const identity: SubagentStartEvent = { runId: host.runId, provider, id: run.id, local: run.localAgent !== undefined };
    const continues = lineage.continues;
    // A continuation keeps its run's token (the owner re-attaches with the one it holds).
    const runToken = continues === undefined ? mintToken() : '';
    const tokenHash = continues?.tokenHash ?? hashToken(runToken);
    const startedAt = continues?.startedAt ?? new Date().toISOString();
    let stored: StoredRun;
    try {
      stored = continues
        ? await this.ledger.transition(continues.runId, { state: 'running', worker: this.ledger.worker }, continues.revision)
        : await this.ledger.create({
            runId: identity.runId,
            id: identity.id,
            provider,
            tokenHash,
            state: 'running',
            startedAt,
            worker: this.ledger.worker,
            ...(lineage.resumedFrom !== undefined && { resumedFrom: lineage.resumedFrom }),
            ...(lineage.parentRunId !== undefined && { parentRunId: lineage.parentRunId }),
            ...(lineage.restore !== undefined && { restore: lineage.restore }),
          });
    } catch (error) {
      await run.dispose().catch(() => undefined);
      lease.release();
      throw error;
    }
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
      state: 'running',
      settled,
      revision: stored.revision,
      recorded: Promise.resolve(),
    };
    this.runs.set(record.runId, record);
    if (record.parentRunId !== undefined) this.nested.add(record);
    this.log.info({ runId: record.runId, provider, owner: owner.id }, 'run started');
    // setImmediate: the start response is queued on the connection before subagent/end can be.
    run.result.finally(() => lease.release()).then(
      (result) => setImmediate(() => this.settle(record, result, undefined, resolveSettled, rejectSettled)),
      (error: unknown) => setImmediate(() => this.settle(record, undefined, error, resolveSettled, rejectSettled)),
    );
    this.emit(record, { kind: 'start', payload: identity });
    return { ...identity, runToken };
  }

  /** Writes a transition of a live run's record, in order after the ones before it. */
  private record(live: LiveRun, patch: RunPatch): void {
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
    record.settledAt = new Date().toISOString();
    if (record.state === 'running') record.state = 'settled';
    // The one line per run end an operator greps for (the start is logged in publish).
    this.log.info(
      {
        runId: record.runId,
        provider: record.provider,
        owner: record.owner.id,
        durationMs: Date.parse(record.settledAt) - Date.parse(record.startedAt),
        stopReason: given?.stopReason ?? 'error',
      },
      'run ended',
    );
    const base = { runId: record.runId, provider: record.provider, id: record.id, local: record.local };
    if (given) {
      const result = boundedResult(given, this.maxOutputBytes, record.host?.budget.truncated === true);
      record.result = result;
      resolve(result);
      this.record(record, { state: record.state, settledAt: record.settledAt, result });
      const last = result.output.length > 0 ? { lastAssistantMessage: result.output } : {};
      const usage = result.usage ? { usage: result.usage } : {};
      this.emit(record, { kind: 'end', payload: { ...base, stopReason: result.stopReason, ...last, ...usage, result } });
    } else {
      const message = error instanceof Error ? error.message : String(error);
      this.log.error({ err: error, runId: record.runId }, 'run failed with an infrastructure fault');
      reject(error instanceof Error ? error : new Error(message));
      const failure: SubagentResult = { output: [], stopReason: 'error', diagnostic: `infrastructure fault: ${message}` };
      this.record(record, { state: record.state, settledAt: record.settledAt, result: failure });
      this.emit(record, { kind: 'end', payload: { ...base, stopReason: 'error', error: { message } } });
    }
  }

  private emit(record: LiveRun, event: Parameters<LifecycleListener>[0]): void {
    const owner = record.owner;
    const deliveries: Array<() => void | Promise<void>> = [
      () => (event.kind === 'start' ? owner.notifyStart(event.payload) : owner.notifyEnd(event.payload)),
      ...[...this.listeners].map((listener) => () => listener(event)),
    ];
    for (const deliver of deliveries) {
      try {
        const returned = deliver();
        if (returned instanceof Promise) {
          returned.catch((error: unknown) => this.log.warn({ err: error, runId: record.runId }, `subagent/${event.kind} listener rejected`));
        }
      } catch (error) {
        this.log.warn({ err: error, runId: record.runId }, `subagent/${event.kind} listener threw`);
      }
    }
  }

  private startFailure(error: unknown, signal: AbortSignal, provider: string): SubagentError {
    if (error instanceof SubagentError) return error;
    if (signal.aborted) return new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    this.log.warn({ err: error, provider }, 'provider failed to start a child');
    return new SubagentError('START_FAILED', `provider "${provider}" failed to start: ${error instanceof Error ? error.message : String(error)}`);
  }

  /** A run the asking connection owns; UNKNOWN_RUN or NOT_OWNER otherwise. */
  private async owned(runId: string, owner: RunOwner): Promise<LiveRun> {
    const record = this.runs.get(runId);
    if (!record) {
      const known = (await this.ledger.get(runId)) !== undefined;
      throw known
        ? new SubagentError('NOT_OWNER', `run ${runId} was started before this daemon restarted: run/attach with its token first`, { field: '/runId' })
        : new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
    }
    if (record.owner !== owner) throw new SubagentError('NOT_OWNER', `run ${runId} belongs to another connection`, { field: '/runId' });
    return record;
  }

  /** `after-step` needs the provider's `interrupt`; without it the run stops `now`. */
  async cancel(runId: string, owner: RunOwner, level: InterruptLevel = 'now'): Promise<void> {
    const record = await this.owned(runId, owner);
    if (record.state !== 'running') return;
    if (level === 'after-step' && record.run?.interrupt) record.run.interrupt('after-step');
    else {
      record.abort.abort(new SubagentError('ABORTED', 'the run was cancelled'));
      this.cancelDescendants(record.runId);
    }
  }

  /** Nested delegation: a cancelled or disposed run takes the runs its child started down with it. */
  private cancelDescendants(runId: string): void {
    for (const child of this.nested) {
      if (child.parentRunId !== runId || child.state !== 'running') continue;
      child.abort.abort(new SubagentError('ABORTED', `its parent run ${runId} was cancelled`));
      this.cancelDescendants(child.runId);
    }
  }

  /** The connection a live run belongs to now (nested starts and waits act as it). */
  ownerOf(runId: string): RunOwner | undefined {
    return this.runs.get(runId)?.owner;
  }

  async dispose(runId: string, owner: RunOwner): Promise<void> {
    return this.disposeRecord(await this.owned(runId, owner));
  }

  private disposeRecord(record: LiveRun): Promise<void> {
    clearTimeout(record.graceTimer);
    record.disposing ??= (async () => {
      if (record.state === 'running') record.abort.abort(new SubagentError('ABORTED', 'the run was disposed'));
      this.cancelDescendants(record.runId);
      try {
        await record.run?.dispose();
        // A run disposed while running settles (aborted) first: record that before 'disposed'.
        await record.settled.catch(() => undefined);
      } finally {
        record.state = 'disposed';
        // A disposed child's session stays on disk; holding it in memory too would only grow.
        record.run = undefined;
        const keep = record.checkpointed || record.keptForNextDaemon || (this.shuttingDown && record.owner.durable === true);
        if (!keep) this.record(record, { state: 'disposed' });
        this.disposedCount += 1;
        this.pruneDisposed();
      }
    })();
    return record.disposing;
  }

  private pruneDisposed(): void {
    if (this.disposedCount <= DISPOSED_RETENTION) return;
    for (const [runId, record] of this.runs) {
      if (this.disposedCount <= DISPOSED_RETENTION) break;
      if (record.state === 'disposed') {
        this.runs.delete(runId);
        this.nested.delete(record);
        this.disposedCount -= 1;
      }
    }
  }

  async sendMessage(runId: string, owner: RunOwner, content: ContentBlock[]): Promise<void> {
    const record = await this.owned(runId, owner);
    const send = record.run?.sendMessage;
    if (!send) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support sendMessage`);
    if (record.state !== 'running') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}, not running`);
    send.call(record.run, content);
  }

  /** `report`: a continuable child's report sink, for a child that must first be restored (children.ts). */
  async resume(runId: string, owner: RunOwner, prompt: ContentBlock[], stream: boolean, report?: StartExtras['report']): Promise<StartResult> {
    const record = await this.owned(runId, owner);
    if (!record.run) await this.restoreRun(record, owner, stream, report);
    if (!record.run) throw new SubagentError('RUN_STATE', `run ${runId} has no live child`);
    const resume = record.run.resume;
    if (!resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support resume`);
    if (this.shuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    if (record.state !== 'settled') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}; only a settled run can be resumed`);
    const abort = new AbortController();
    const lease = await this.ledger.admit(owner.id, record.provider, abort.signal);
    let next: DaemonRun;
    try {
      next = await resume.call(record.run, prompt, { signal: abort.signal });
    } catch (error) {
      lease.release();
      throw error;
    }
    // The provider keeps the chain's first host for its whole life: point it at the newest run.
    const host = record.host!;
    host.runId = mintRunId();
    host.stream = stream;
    host.budget = new StreamBudget(this.maxOutputBytes);
    host.owner = owner;
    const restore = (await this.ledger.get(record.runId))?.restore;
    return this.publish(record.provider, next, owner, abort, host, lease, { resumedFrom: record.runId, ...(restore && { restore }) });
  }

  /** A run a previous daemon ran: its provider brings the child back from its log, if it can. */
  private async restoreRun(record: LiveRun, owner: RunOwner, stream: boolean, report?: StartExtras['report']): Promise<void> {
    const provider = this.registry.get(record.provider);
    if (!provider?.restore) {
      throw new SubagentError('UNSUPPORTED_OPERATION', `run ${record.runId} was run by a previous daemon and provider "${record.provider}" cannot restore it`);
    }
    const host = new ServiceRunHost(record.runId, owner, stream, this.log, record.provider, this.maxOutputBytes);
    const stored = (await this.ledger.get(record.runId))?.restore;
    record.run = await provider.restore(record.id, {
      ...(report && { report }),
      host,
      result: record.result ?? { output: [], stopReason: 'error' },
      ...(stored?.persona !== undefined && { persona: stored.persona }),
      ...(stored?.toolFilter && { toolFilter: stored.toolFilter }),
      ...(stored?.maxDepth !== undefined && { maxDepth: stored.maxDepth }),
    });
    record.host = host;
    this.log.info({ runId: record.runId, child: record.id }, 'restored a child from its session log');
  }

  async wait(runId: string, owner: RunOwner): Promise<SubagentResult> {
    return (await this.owned(runId, owner)).settled;
  }

  /**
   * Take ownership of a run with its token: a run detached by a closed connection (within the
   * grace period), or one a previous daemon ran (its recorded outcome).
   */
  async attach(runId: string, runToken: string, owner: RunOwner, stream?: boolean): Promise<AttachResult> {
    const record = this.runs.get(runId) ?? (await this.adoptFromLedger(runId));
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
    return { run: info(record, owner), ...(record.result && { result: record.result }) };
  }

  private async adoptFromLedger(runId: string): Promise<LiveRun | undefined> {
    const stored = await this.ledger.get(runId);
    if (!stored) return undefined;
    // Another attach may have adopted it while this one read the ledger.
    const adopted = this.runs.get(runId);
    if (adopted) return adopted;
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
      state: storedState(stored),
      settledAt: stored.settledAt ?? stored.startedAt,
      result,
      settled: Promise.resolve(result),
      revision: stored.revision,
      recorded: Promise.resolve(),
    };
    this.runs.set(runId, record);
    return record;
  }

  /** Runs of this daemon and of the ones before it, newest first, a page at a time (store/run-paging.ts). */
  list(asker: RunOwner, params: RunsListParams = {}): Promise<RunsListResult> {
    // Every run has a ledger record from its start on; the live record, when there is one, is the truth.
    return this.ledger.page(params, (stored): ListedRun => {
      const live = this.runs.get(stored.runId);
      if (live) {
        return {
          runId: live.runId,
          state: live.state,
          provider: live.provider,
          startedAt: live.startedAt,
          mine: live.owner === asker,
          info: () => info(live, asker),
        };
      }
      const state = storedState(stored);
      return { runId: stored.runId, state, provider: stored.provider, startedAt: stored.startedAt, mine: false, info: () => runInfo(stored, state, false) };
    });
  }

  /** Anyone may see a run's record; its session (prompts, tool arguments) only its owner, or the token's holder. */
  async inspect(runId: string, asker: RunOwner, runToken?: string): Promise<InspectResult> {
    const record = this.runs.get(runId);
    if (!record) {
      const stored = await this.ledger.get(runId);
      if (!stored) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
      return { run: runInfo(stored, storedState(stored), false) };
    }
    const entitled = record.owner === asker || (runToken !== undefined && tokenMatches(runToken, record.tokenHash));
    const session = entitled ? sessionOf(record.run?.localAgent) : undefined;
    return session ? { run: info(record, asker), header: session.header, events: [...session.events] } : { run: info(record, asker) };
  }

  counts(): Record<RunState, number> {
    const counts: Record<RunState, number> = { starting: this.starting.size, running: 0, settled: 0, disposed: 0 };
    for (const record of this.runs.values()) counts[record.state] += 1;
    return counts;
  }

  /** Whether any run still works or waits to start (idle shutdown waits for none). */
  get busy(): boolean {
    return this.starting.size > 0 || [...this.runs.values()].some((r) => r.state === 'running');
  }

  /**
   * A connection went away: cancel its pending starts (they have no token yet); detach its runs
   * for the grace period, after which they are cancelled and disposed unless re-attached.
   */
  ownerGone(owner: RunOwner): Promise<void> {
    for (const pending of this.starting.values()) {
      if (pending.owner === owner) pending.abort.abort(new SubagentError('ABORTED', 'the client disconnected'));
    }
    const mine = [...this.runs.values()].filter((record) => record.owner === owner);
    for (const record of mine) {
      record.owner = DETACHED;
      if (record.host) record.host.owner = DETACHED;
    }
    if (this.detachGraceMs === 0) return Promise.allSettled(mine.map((r) => this.disposeRecord(r))).then(() => undefined);
    for (const record of mine) if (record.state !== 'disposed') this.startGrace(record);
    return Promise.resolve();
  }

  /** Give a detached run the grace period to be re-attached, then cancel and dispose it. */
  private startGrace(record: LiveRun): void {
    clearTimeout(record.graceTimer);
    record.graceTimer = setTimeout(() => {
      if (record.owner !== DETACHED) return;
      this.log.info({ runId: record.runId }, 'detached run was not re-attached in time: disposing it');
      void this.disposeRecord(record);
    }, this.detachGraceMs);
    record.graceTimer.unref();
  }

  /**
   * Refuse new starts; with `drain`, let running children finish up to the timeout. Children
   * still running then are checkpointed when their provider can restore them (their logs hold
   * every finished step, and the next daemon continues them), else cancelled; then dispose all.
   * A drain also leaves settled, undisposed children of such providers resumable by their owners.
   */
  async shutdown(drain: boolean, timeoutMs: number): Promise<void> {
    this.shuttingDown = true;
    for (const pending of this.starting.values()) pending.abort.abort(new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down'));
    const running = [...this.runs.values()].filter((record) => record.state === 'running');
    if (drain && running.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([Promise.allSettled(running.map((r) => r.settled)), timeout]);
      clearTimeout(timer);
      for (const record of running) {
        if (record.state !== 'running' || !this.registry.get(record.provider)?.restore) continue;
        record.checkpointed = true;
        this.record(record, { state: 'checkpointed' });
        this.log.info({ runId: record.runId }, 'drain timed out: child checkpointed for the next daemon');
      }
    }
    if (drain) {
      // A settled child nobody disposed stays resumable (restored from its log) by the next daemon.
      for (const record of this.runs.values()) {
        if (record.state === 'settled' && !record.disposing && this.registry.get(record.provider)?.restore) record.keptForNextDaemon = true;
      }
    }
    await Promise.allSettled([...this.runs.values()].map((record) => this.disposeRecord(record)));
    await Promise.allSettled([...this.runs.values()].map((record) => record.recorded));
    await this.ledger.close();
  }

  /**
   * Continue the children a draining daemon checkpointed: each is restored from its log and
   * told to go on, under its old run id and token, detached until its owner re-attaches.
   */
  async continueCheckpointed(): Promise<string[]> {
    const continued: string[] = [];
    for (const stored of await this.ledger.leftBehind()) {
      if (stored.state !== 'checkpointed') continue;
      try {
        await this.continueRun(stored);
        continued.push(stored.runId);
      } catch (error) {
        const diagnostic = `the checkpointed child could not be continued: ${error instanceof Error ? error.message : String(error)}`;
        this.log.error({ err: error, runId: stored.runId }, 'could not continue a checkpointed child');
        const current = (await this.ledger.get(stored.runId)) ?? stored;
        await this.ledger
          .transition(stored.runId, { state: 'settled', settledAt: new Date().toISOString(), result: { output: [], stopReason: 'error', diagnostic } }, current.revision)
          .catch((failure: unknown) => this.log.error({ err: failure, runId: stored.runId }, 'could not record the failed continuation'));
      }
    }
    return continued;
  }

  private async continueRun(stored: StoredRun): Promise<void> {
    const provider = this.registry.get(stored.provider);
    if (!provider?.restore) throw new Error(`provider "${stored.provider}" is not registered or cannot restore children`);
    const host = new ServiceRunHost(stored.runId, DETACHED, false, this.log, stored.provider, this.maxOutputBytes);
    const restored = await provider.restore(stored.id, {
      host,
      result: { output: [], stopReason: 'aborted' },
      ...(stored.restore?.persona !== undefined && { persona: stored.restore.persona }),
      ...(stored.restore?.toolFilter && { toolFilter: stored.restore.toolFilter }),
      ...(stored.restore?.maxDepth !== undefined && { maxDepth: stored.restore.maxDepth }),
    });
    const abort = new AbortController();
    const lease = await this.ledger.admit(DETACHED.id, stored.provider, abort.signal);
    let run: DaemonRun;
    try {
      run = await restored.resume!([{ type: 'text', text: CONTINUE_PROMPT }], { signal: abort.signal });
    } catch (error) {
      lease.release();
      throw error;
    }
    await this.publish(stored.provider, run, DETACHED, abort, host, lease, { continues: stored, ...(stored.restore && { restore: stored.restore }) });
    this.startGrace(this.runs.get(stored.runId)!);
    this.log.info({ runId: stored.runId }, 'continuing a checkpointed child');
  }
}

/** What a waiter on a checkpointed run learns: the truth, and where the outcome will be. */
function handedOver(runId: string): SubagentError {
  return new SubagentError(
    'HANDED_OVER',
    `run ${runId} was handed to the next daemon, which continues it: re-attach (run/attach with its token) and wait on the next daemon`,
  );
}

function toProviderRequest(params: StartParams, depth: number, signal: AbortSignal, host: RunHost): ProviderStartRequest {
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
  };
}

/** The public record of a run, live or known only from the index. */
function runInfo(
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

const info = (record: LiveRun, asker: RunOwner): RunInfo => runInfo(record, record.state, record.owner === asker);

/** A previous daemon's run: whatever it was doing is over (the index's interrupted runs read as settled). */
const storedState = (stored: StoredRun): RunState => (stored.state === 'disposed' ? 'disposed' : 'settled');

/** In-process children expose their session; anything else has nothing to inspect. */
function sessionOf(agent: unknown): { header: SessionHeader; events: readonly SessionEvent[] } | undefined {
  if (typeof agent !== 'object' || agent === null) return undefined;
  const candidate = agent as { header?: unknown; events?: unknown };
  if (typeof candidate.header !== 'object' || !Array.isArray(candidate.events)) return undefined;
  return candidate as { header: SessionHeader; events: readonly SessionEvent[] };
}
