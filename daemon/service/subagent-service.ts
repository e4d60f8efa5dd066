/**
 * The seam behind the wire: validates starts, runs providers, owns the run table, routes
 * lifecycle events to the connection that started each run, and enforces ownership.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  SubagentError,
  type ContentBlock,
  type EndParams,
  type InspectResult,
  type PermissionParams,
  type PermissionResult,
  type RunEvent,
  type RunEventParams,
  type RunInfo,
  type RunState,
  type SessionEvent,
  type SessionHeader,
  type StartParams,
  type StartResult,
  type SubagentResult,
  type SubagentRun,
  type SubagentStartEvent,
  type ToolCallParams,
  type ToolCallResult,
} from '../../protocol/index.js';
import type { ProviderStartRequest, RunHost } from '../provider.js';
import { AdmissionQueue, DEFAULT_ADMISSION_LIMITS, type AdmissionLimits, type Release } from './admission-queue.js';
import { ProviderRegistry } from './provider-registry.js';
import { checkStartRequest, childDepth } from './start-checks.js';

/** The connection a run belongs to, as the service sees it. */
export interface RunOwner {
  readonly id: string;
  readonly open: boolean;
  notifyStart(event: SubagentStartEvent): void;
  notifyEnd(event: EndParams): void;
  notifyRunEvent(event: RunEventParams): void;
  callTool(params: ToolCallParams, signal: AbortSignal): Promise<ToolCallResult>;
  askPermission(params: PermissionParams, signal: AbortSignal): Promise<PermissionResult>;
}

export type LifecycleListener = (
  event: { kind: 'start'; payload: SubagentStartEvent } | { kind: 'end'; payload: EndParams },
) => void | Promise<void>;

interface RunRecord {
  readonly runId: string;
  readonly provider: string;
  readonly id: string;
  readonly local: boolean;
  readonly owner: RunOwner;
  readonly run: SubagentRun;
  /** Shared by a run and its resumptions: aborting it cancels whichever turn is live. */
  readonly chain: AbortController;
  readonly host: ServiceRunHost;
  readonly startedAt: string;
  state: RunState;
  settledAt?: string;
  result?: SubagentResult;
  readonly settled: Promise<SubagentResult>;
  disposing?: Promise<void>;
}

/** How many disposed runs stay answerable to run/wait and run/inspect. */
const DISPOSED_RETENTION = 1000;

/** Unguessable run ids: 144 random bits. */
export function mintRunId(): string {
  return `run_${randomBytes(18).toString('base64url')}`;
}

class ServiceRunHost implements RunHost {
  runId: string;
  constructor(
    runId: string,
    private readonly owner: RunOwner,
    public stream: boolean,
    readonly log: Logger,
  ) {
    this.runId = runId;
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
    if (this.stream && this.owner.open) this.owner.notifyRunEvent({ runId: this.runId, event });
  }
}

export class SubagentService {
  readonly registry = new ProviderRegistry();
  private readonly runs = new Map<string, RunRecord>();
  private readonly starting = new Map<string, { owner: RunOwner; abort: AbortController }>();
  private readonly listeners = new Set<LifecycleListener>();
  private disposedCount = 0;
  private shuttingDown = false;

  readonly admission: AdmissionQueue;

  constructor(
    private readonly log: Logger,
    limits: AdmissionLimits = DEFAULT_ADMISSION_LIMITS,
  ) {
    this.admission = new AdmissionQueue(limits);
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Observe every run's lifecycle (embedders, ops). Listener failures are logged and contained. */
  onLifecycle(listener: LifecycleListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(params: StartParams, owner: RunOwner, cancel: AbortSignal): Promise<StartResult> {
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
    const chain = new AbortController();
    const onCancel = (): void => chain.abort(new SubagentError('ABORTED', 'start was cancelled before the child was ready'));
    if (cancel.aborted) onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    const host = new ServiceRunHost(runId, owner, params.stream === true, this.log.child({ runId, provider: provider.name }));
    this.starting.set(runId, { owner, abort: chain });
    let run: SubagentRun;
    let release: Release | undefined;
    try {
      release = await this.admission.acquire(owner.id, chain.signal);
      run = await provider.start(toProviderRequest(params, depth, chain.signal, host));
    } catch (error) {
      release?.();
      throw this.startFailure(error, chain.signal, provider.name);
    } finally {
      cancel.removeEventListener('abort', onCancel);
      this.starting.delete(runId);
    }
    if (chain.signal.aborted || !owner.open) {
      // Ready too late: the caller already gave up, so the run is never published.
      await run.dispose().catch((error: unknown) => this.log.warn({ err: error, runId }, 'dispose after late readiness failed'));
      release();
      throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    }
    return this.publish(provider.name, run, owner, chain, host, release);
  }

  /** Publish a ready run: observe its result first, so even a settled child emits start before end. */
  private publish(
    provider: string,
    run: SubagentRun,
    owner: RunOwner,
    chain: AbortController,
    host: ServiceRunHost,
    release: Release,
  ): StartResult {
    const identity: SubagentStartEvent = { runId: host.runId, provider, id: run.id, local: run.localAgent !== undefined };
    let resolveSettled!: (result: SubagentResult) => void;
    let rejectSettled!: (error: unknown) => void;
    const settled = new Promise<SubagentResult>((resolve, reject) => {
      resolveSettled = resolve;
      rejectSettled = reject;
    });
    settled.catch(() => undefined);
    const record: RunRecord = {
      ...identity,
      owner,
      run,
      chain,
      host,
      startedAt: new Date().toISOString(),
      state: 'running',
      settled,
    };
    this.runs.set(record.runId, record);
    // setImmediate: the start response is queued on the connection before subagent/end can be.
    run.result.finally(release).then(
      (result) => setImmediate(() => this.settle(record, result, undefined, resolveSettled, rejectSettled)),
      (error: unknown) => setImmediate(() => this.settle(record, undefined, error, resolveSettled, rejectSettled)),
    );
    this.emit(record, { kind: 'start', payload: identity });
    return identity;
  }

  private settle(
    record: RunRecord,
    result: SubagentResult | undefined,
    error: unknown,
    resolve: (r: SubagentResult) => void,
    reject: (e: unknown) => void,
  ): void {
    record.settledAt = new Date().toISOString();
    if (record.state === 'running') record.state = 'settled';
    const base = { runId: record.runId, provider: record.provider, id: record.id, local: record.local };
    if (result) {
      record.result = result;
      resolve(result);
      const last = result.output.length > 0 ? { lastAssistantMessage: result.output } : {};
      const usage = result.usage ? { usage: result.usage } : {};
      this.emit(record, { kind: 'end', payload: { ...base, stopReason: result.stopReason, ...last, ...usage, result } });
    } else {
      const message = error instanceof Error ? error.message : String(error);
      this.log.error({ err: error, runId: record.runId }, 'run failed with an infrastructure fault');
      reject(error instanceof Error ? error : new Error(message));
      this.emit(record, { kind: 'end', payload: { ...base, stopReason: 'error', error: { message } } });
    }
  }

  private emit(record: RunRecord, event: Parameters<LifecycleListener>[0]): void {
    const deliveries: Array<() => void | Promise<void>> = [
      () => (event.kind === 'start' ? record.owner.notifyStart(event.payload) : record.owner.notifyEnd(event.payload)),
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
  private owned(runId: string, owner: RunOwner): RunRecord {
    const record = this.runs.get(runId);
    if (!record) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
    if (record.owner !== owner) throw new SubagentError('NOT_OWNER', `run ${runId} belongs to another connection`, { field: '/runId' });
    return record;
  }

  cancel(runId: string, owner: RunOwner): void {
    const record = this.owned(runId, owner);
    if (record.state === 'running') record.chain.abort(new SubagentError('ABORTED', 'the run was cancelled'));
  }

  dispose(runId: string, owner: RunOwner): Promise<void> {
    return this.disposeRecord(this.owned(runId, owner));
  }

  private disposeRecord(record: RunRecord): Promise<void> {
    record.disposing ??= (async () => {
      if (record.state === 'running') record.chain.abort(new SubagentError('ABORTED', 'the run was disposed'));
      try {
        await record.run.dispose();
      } finally {
        record.state = 'disposed';
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
        this.disposedCount -= 1;
      }
    }
  }

  sendMessage(runId: string, owner: RunOwner, content: ContentBlock[]): void {
    const record = this.owned(runId, owner);
    const send = record.run.sendMessage;
    if (!send) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support sendMessage`);
    if (record.state !== 'running') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}, not running`);
    send.call(record.run, content);
  }

  async resume(runId: string, owner: RunOwner, prompt: ContentBlock[], stream: boolean): Promise<StartResult> {
    const record = this.owned(runId, owner);
    const resume = record.run.resume;
    if (!resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support resume`);
    if (this.shuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    if (record.state !== 'settled') throw new SubagentError('RUN_STATE', `run ${runId} is ${record.state}; only a settled run can be resumed`);
    const release = await this.admission.acquire(owner.id, new AbortController().signal);
    let next: SubagentRun;
    try {
      next = await resume.call(record.run, prompt);
    } catch (error) {
      release();
      throw error;
    }
    // The provider keeps the chain's first host for its whole life: point it at the newest run.
    record.host.runId = mintRunId();
    record.host.stream = stream;
    return this.publish(record.provider, next, owner, record.chain, record.host, release);
  }

  wait(runId: string, owner: RunOwner): Promise<SubagentResult> {
    return this.owned(runId, owner).settled;
  }

  list(asker: RunOwner, filter: { state?: RunState; provider?: string } = {}): RunInfo[] {
    const out: RunInfo[] = [];
    for (const record of this.runs.values()) {
      if (filter.state && record.state !== filter.state) continue;
      if (filter.provider && record.provider !== filter.provider) continue;
      out.push(info(record, asker));
    }
    return out;
  }

  inspect(runId: string, asker: RunOwner): InspectResult {
    const record = this.runs.get(runId);
    if (!record) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId}`, { field: '/runId' });
    const session = record.owner === asker ? sessionOf(record.run.localAgent) : undefined;
    return session ? { run: info(record, asker), header: session.header, events: [...session.events] } : { run: info(record, asker) };
  }

  counts(): Record<RunState, number> {
    const counts: Record<RunState, number> = { starting: this.starting.size, running: 0, settled: 0, disposed: 0 };
    for (const record of this.runs.values()) counts[record.state] += 1;
    return counts;
  }

  /** A connection went away: cancel its pending starts, then cancel and dispose its runs. */
  async ownerGone(owner: RunOwner): Promise<void> {
    for (const pending of this.starting.values()) {
      if (pending.owner === owner) pending.abort.abort(new SubagentError('ABORTED', 'the client disconnected'));
    }
    const mine = [...this.runs.values()].filter((record) => record.owner === owner);
    await Promise.allSettled(mine.map((record) => this.disposeRecord(record)));
  }

  /** Refuse new starts; with `drain`, let running children finish up to the timeout; then dispose all. */
  async shutdown(drain: boolean, timeoutMs: number): Promise<void> {
    this.shuttingDown = true;
    for (const pending of this.starting.values()) pending.abort.abort(new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down'));
    const running = [...this.runs.values()].filter((record) => record.state === 'running');
    if (drain && running.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([Promise.allSettled(running.map((r) => r.settled)), timeout]);
      clearTimeout(timer);
    }
    await Promise.allSettled([...this.runs.values()].map((record) => this.disposeRecord(record)));
  }
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

function info(record: RunRecord, asker: RunOwner): RunInfo {
  return {
    runId: record.runId,
    id: record.id,
    provider: record.provider,
    state: record.state,
    startedAt: record.startedAt,
    mine: record.owner === asker,
    ...(record.result && { stopReason: record.result.stopReason }),
    ...(record.settledAt !== undefined && { settledAt: record.settledAt }),
    ...(record.result?.usage && { usage: record.result.usage }),
  };
}

/** In-process children expose their session; anything else has nothing to inspect. */
function sessionOf(agent: unknown): { header: SessionHeader; events: readonly SessionEvent[] } | undefined {
  if (typeof agent !== 'object' || agent === null) return undefined;
  const candidate = agent as { header?: unknown; events?: unknown };
  if (typeof candidate.header !== 'object' || !Array.isArray(candidate.events)) return undefined;
  return candidate as { header: SessionHeader; events: readonly SessionEvent[] };
}
