/**
 * `SubagentService` over a daemon connection. Harness code uses it exactly like the in-process
 * service: daemon providers and client-local providers share one namespace, runs come back as
 * seam `SubagentRun`s, and lifecycle events arrive through `on`. With a reconnect policy, a lost
 * connection is re-dialled and the unsettled runs are re-attached by their tokens
 * (reconnecting-connection.ts); what the daemon sends unasked is served by daemon-notifications.ts
 * and daemon-requests.ts.
 *
 * Size: a little over 400 lines because it is the whole public surface of the seam's service
 * (list, start, adopt, close, on, ops, children) plus each run's controls (cancel, dispose,
 * sendMessage, resume, wait); every piece of logic behind them lives in the modules named above.
 */
import { untilAnswered } from './start-retry.js';
import { randomBytes } from 'node:crypto';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import {
  CancelRequest,
  DisposeRequest,
  ProvidersListRequest,
  ResumeRequest,
  SendMessageRequest,
  StartRequest,
  SubagentError,
  WaitRequest,
  minorOf,
  type ContentBlock,
  type DaemonIdentity,
  type InitializeResult,
  type ProgressToken,
  type ProviderDescriptor,
  type RunEvent,
  type StartParams,
  type StartResult,
  type SubagentResult,
  type SubagentRun,
} from '../protocol/index.js';
import { EventHub } from './event-hub.js';
import { isHandedOver } from './wire-errors.js';
import { RemoteChildren } from './remote-children.js';
import { LocalProviders } from './local-providers.js';
import { continuationTrace, startParams, toolMap } from './start-fields.js';
import { ProviderDirectory } from './provider-directory.js';
import { DaemonOps } from './daemon-ops.js';
import type { RpcChannel } from './rpc-channel.js';
import { createRunHandle, type ResumeOptions, type RunControls } from './run-handle.js';
import { RunRecord } from './run-record.js';
import { RunTable } from './run-table.js';
import { serveDaemonRequests } from './daemon-requests.js';
import { serveDaemonNotifications } from './daemon-notifications.js';
import { handshake, type ClientInfo } from './handshake.js';
import { rollBackStart } from './start-rollback.js'; // aborted before the answer: reject, roll back
import { ReconnectingConnection, type ReconnectSetup } from './reconnecting-connection.js';
import type {
  ClientLogger,
  ClientProvider,
  ClientStartRequest,
  ClientTool,
  LocalSubagentProvider,
  PermissionHandler,
  RemoteProvider,
  RemoteSubagentRun,
  ServiceEventName,
  ServiceListener,
} from './types.js';

export type { ReconnectSetup } from './reconnecting-connection.js';

export interface ServiceOptions {
  readonly clientInfo: ClientInfo;
  readonly token?: string;
  /** Deadline for control requests (initialize, providers/list, run/cancel, run/dispose, run/sendMessage). */
  readonly requestTimeoutMs?: number;
  /** Deadline for readiness (`subagent/start`, `run/resume`); none unless set. */
  readonly startTimeoutMs?: number;
  readonly logger: ClientLogger;
  readonly onPermission?: PermissionHandler;
  /** Re-dial a lost daemon with this policy; without it a loss fails every run (DAEMON_UNAVAILABLE). */
  readonly reconnect?: ReconnectSetup;
  /**
   * The secret that owns this service's continuable children (at least 16 characters). Default:
   * a random key for this service's life; give a stored one to reach the children from later processes.
   */
  readonly ownerKey?: string;
}

export class RemoteSubagentService {
  /**
   * Continuable children (`child/*`): present only when the daemon offers them (capability by
   * presence, decided at `initialize`).
   */
  declare readonly children?: RemoteChildren;
  private readonly events: EventHub;
  private readonly directory: ProviderDirectory;
  private readonly local: LocalProviders;
  private readonly runs = new RunTable();
  private readonly logger: ClientLogger;
  private identity: DaemonIdentity | undefined;
  private opsSurface: DaemonOps | undefined;
  private daemonProtocol = '';
  /** A 1.3 daemon sends no `subagent/start` for a run its reply hands over: this client emits it. */
  private startInReply = false;
  /** The connection of the moment, and the reconnect state machine that replaces it. */
  private readonly connection: ReconnectingConnection;
  /** `onStartProgress` of each unanswered start that has one, by its `progressToken`. */
  private readonly startProgress = new Map<ProgressToken, NonNullable<ClientStartRequest['onStartProgress']>>();
  private progressTokens = 0;
  private readonly controls: RunControls = {
    dispose: (record) => this.disposeRun(record),
    sendMessage: (record, content) => this.sendMessage(record, content),
    resume: (record, content, options) => this.resumeRun(record, content, options),
    wait: (record) => this.waitRun(record),
    mayRetryDispose: (error) => this.connection.mayRecover(error),
  };

  private constructor(
    channel: RpcChannel,
    private readonly options: ServiceOptions,
  ) {
    this.logger = options.logger;
    this.events = new EventHub(this.logger);
    this.directory = new ProviderDirectory(this.events);
    this.local = new LocalProviders(this.events);
    this.listenTo(channel);
    this.connection = new ReconnectingConnection(channel, {
      setup: options.reconnect,
      clientInfo: options.clientInfo,
      requestTimeoutMs: options.requestTimeoutMs,
      runs: this.runs,
      events: this.events,
      logger: this.logger,
      epoch: () => this.identity?.epoch,
      listenTo: (next) => this.listenTo(next),
      adopt: (answer) => this.learnDaemon(answer),
      reattachChildren: (next) => this.children?.reattach(next),
      sendCancel: (next, record) => this.sendCancel(next, record),
    });
  }

  /** The connection calls go to now. */
  private get channel(): RpcChannel {
    return this.connection.channel;
  }

  /** Register every handler, start reading, and perform the `initialize` handshake. */
  static async open(channel: RpcChannel, options: ServiceOptions): Promise<RemoteSubagentService> {
    const service = new RemoteSubagentService(channel, options);
    channel.listen();
    let answer: InitializeResult;
    try {
      answer = await handshake(channel, options.clientInfo, options.token, options.requestTimeoutMs);
    } catch (error) {
      // Never handed out: nothing to reconnect.
      service.connection.abandon();
      throw error;
    }
    service.learnDaemon(answer);
    if (answer.features?.continuableChildren === true) service.offerChildren();
    return service;
  }

  /** An `initialize` answer, the first or a re-dial's: who the daemon is and what it offers. */
  private learnDaemon(answer: InitializeResult): void {
    const first = this.identity === undefined;
    this.identity = answer.daemon;
    this.daemonProtocol = answer.protocolVersion;
    this.startInReply = minorOf(answer.protocolVersion) >= 3;
    if (first) this.directory.seed(answer.providers);
    else this.directory.replace(answer.providers);
  }

  private offerChildren(): void {
    const ownerKey = this.options.ownerKey ?? randomBytes(24).toString('base64url');
    if (ownerKey.length < 16) throw new SubagentError('INVALID_REQUEST', 'ownerKey must be at least 16 characters', { field: '/ownerKey' });
    const children = new RemoteChildren({
      channel: () => this.channel,
      describe: (name) => this.directory.get(name),
      ownerKey,
      protocolVersion: () => this.daemonProtocol,
      requestTimeoutMs: this.options.requestTimeoutMs,
      startTimeoutMs: this.options.startTimeoutMs,
      logger: this.logger,
    });
    Object.defineProperty(this, 'children', { value: children, enumerable: true });
  }

  /** Status, run list, inspect, attach and shutdown: the daemon's operations surface. */
  get ops(): DaemonOps {
    this.opsSurface ??= new DaemonOps(() => this.channel, this.options.requestTimeoutMs);
    return this.opsSurface;
  }

  /** The daemon's identity from `initialize`; `epoch` changes when the daemon restarts. */
  get daemon(): DaemonIdentity {
    if (!this.identity) throw new SubagentError('NOT_INITIALIZED', 'the service is not initialized');
    return this.identity;
  }

  get protocolVersion(): string {
    return this.daemonProtocol;
  }

  /**
   * DAEMON_UNAVAILABLE while there is no usable connection (gone, or being re-established until
   * the `reconnected` event), else undefined.
   */
  get disconnected(): SubagentError | undefined {
    return this.connection.unavailable();
  }

  /** Provider names: the daemon's in its order, then this process's. */
  list(): string[] {
    const daemon = this.directory.names();
    const taken = new Set(daemon);
    return [...daemon, ...this.local.names().filter((name) => !taken.has(name))];
  }

  getProvider(name: string): ClientProvider | undefined {
    const local = this.local.get(name);
    if (local) return local;
    const descriptor = this.directory.get(name);
    if (!descriptor) return undefined;
    const provider: RemoteProvider = { ...descriptor, start: (request) => this.startRemote(name, request) };
    return provider;
  }

  /**
   * Register a trusted provider of this process. Its name must be free on both sides. The
   * returned disposer removes it: new starts are refused, runs already returned are untouched.
   */
  registerProvider(provider: LocalSubagentProvider): () => void {
    if (this.local.get(provider.name) || this.directory.has(provider.name)) {
      const where = this.directory.has(provider.name) ? 'the daemon' : 'this client';
      throw new SubagentError('DUPLICATE_PROVIDER', `a provider named '${provider.name}' is already registered in ${where}`);
    }
    return this.local.add(provider);
  }

  on<K extends ServiceEventName>(event: K, listener: ServiceListener<K>): () => void {
    return this.events.on(event, listener);
  }

  /** Start a child on the named provider; fulfils only once the child is ready. */
  start(name: string, request: ClientStartRequest): Promise<SubagentRun> {
    const local = this.local.get(name);
    if (local) return this.local.start(local, request);
    return this.startRemote(name, request);
  }

  /** Re-read the daemon's providers (`providers/list`), announcing what changed. */
  async refreshProviders(): Promise<ProviderDescriptor[]> {
    const answer = await this.channel.request(ProvidersListRequest, {}, timeout(this.options.requestTimeoutMs));
    this.directory.replace(answer.providers);
    return answer.providers;
  }

  /**
   * Close the connection (and stop reconnecting). Pending calls and unsettled daemon runs reject
   * with DAEMON_UNAVAILABLE.
   */
  close(): Promise<void> {
    return this.connection.close();
  }

  /**
   * Takes over a run by its token (one this process started before it restarted, or one an
   * earlier daemon ran) and returns a handle for it, so that its `resume` and `dispose` go
   * through this service. `onEvent` receives the streamed events of its continuations.
   */
  async adopt(runId: string, runToken: string, options: { readonly onEvent?: (event: RunEvent) => void } = {}): Promise<RemoteSubagentRun> {
    const gone = this.connection.unavailable();
    if (gone) throw gone;
    const endStart = this.runs.beginStart();
    try {
      const { run, result } = await this.connection.attach(this.channel, { runId, runToken, onEvent: options.onEvent });
      const descriptor = this.directory.get(run.provider);
      const record = new RunRecord({
        runId,
        runToken,
        provider: run.provider,
        runtime: descriptor?.runtime ?? { sendMessage: false, resume: false },
        tools: new Map(),
        onEvent: options.onEvent,
        logger: this.logger,
      });
      this.runs.add(record);
      if (result) record.resolve(result);
      this.connection.retainOnceSettled(record);
      return createRunHandle(record, { runId, runToken, provider: run.provider, id: run.id, local: false }, this.controls);
    } finally {
      endStart();
    }
  }

  private async startRemote(name: string, request: ClientStartRequest): Promise<RemoteSubagentRun> {
    const gone = this.connection.unavailable();
    if (gone) throw gone;
    const descriptor = this.directory.get(name);
    if (!descriptor) {
      throw new SubagentError('NO_PROVIDER', `no provider named '${name}' (available: ${this.list().join(', ') || 'none'})`);
    }
    if (request.signal.aborted) throw new SubagentError('ABORTED', `the start of '${name}' was aborted before it was sent`);
    const tools = toolMap(request.tools);
    const params: Mutable<StartParams> = startParams(name, descriptor, request, tools);
    if (request.onStartProgress) {
      params.progressToken = `start-${++this.progressTokens}`;
      this.startProgress.set(params.progressToken, request.onStartProgress);
    }
    try {
      return await this.openRun(descriptor.runtime, request.signal, tools, request.onEvent, (token) =>
        untilAnswered(this.connection, request.signal, () => this.channel.request(StartRequest, params, { token, ...timeout(this.options.startTimeoutMs) })),
      );
    } finally {
      if (params.progressToken !== undefined) this.startProgress.delete(params.progressToken);
    }
  }

  /**
   * Send a start (or resume) and turn its answer into a run handle. Before readiness the signal
   * cancels the request itself; after readiness it cancels the run.
   */
  private async openRun(
    runtime: ProviderDescriptor['runtime'],
    signal: AbortSignal | undefined,
    tools: ReadonlyMap<string, ClientTool>,
    onEvent: ((event: RunEvent) => void) | undefined,
    send: (token: CancellationTokenSource['token']) => Promise<StartResult>,
  ): Promise<RemoteSubagentRun> {
    const pending = new CancellationTokenSource();
    let record: RunRecord | undefined;
    const onAbort = (): void => {
      if (record) this.cancelRun(record);
      else pending.cancel();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const endStart = this.runs.beginStart();
    try {
      const started = await send(pending.token);
      record = new RunRecord({
        runId: started.runId,
        runToken: started.runToken,
        provider: started.provider,
        runtime,
        tools,
        onEvent,
        logger: this.logger,
      });
      record.detachSignal = () => signal?.removeEventListener('abort', onAbort);
      this.runs.add(record);
      this.connection.retainOnceSettled(record);
      if (signal?.aborted) throw rollBackStart(record, (held) => this.cancelRun(held), (held) => this.disposeRun(held), this.logger);
      if (this.startInReply) this.events.emit('subagent/start', { runId: started.runId, provider: started.provider, id: started.id, local: started.local });
      return createRunHandle(record, started, this.controls);
    } catch (error) {
      signal?.removeEventListener('abort', onAbort);
      throw error;
    } finally {
      endStart();
      pending.dispose();
    }
  }

  private cancelRun(record: RunRecord): void {
    if (record.settled) return;
    record.detachSignal();
    // No connection to send it on yet: the cancel goes out once the run is re-attached.
    if (this.connection.recovering) {
      record.cancelOnReattach = true;
      return;
    }
    this.sendCancel(this.channel, record);
  }

  private sendCancel(channel: RpcChannel, record: RunRecord): void {
    channel
      .request(CancelRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => {
        if (this.connection.mayRecover(error) && !record.settled) record.cancelOnReattach = true;
        else this.logger.error(`cancelling run ${record.runId} failed`, error);
      });
  }

  private async disposeRun(record: RunRecord): Promise<void> {
    record.detachSignal();
    await this.channel.request(DisposeRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs));
    this.connection.forget(record.runId);
    record.disposed = true;
  }

  /** The seam's `sendMessage` returns nothing, so a failure can only be reported to the logger. */
  private sendMessage(record: RunRecord, content: ContentBlock[]): void {
    this.channel
      .request(SendMessageRequest, { runId: record.runId, content }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => this.logger.error(`sendMessage to run ${record.runId} failed`, error));
  }

  private async resumeRun(record: RunRecord, content: ContentBlock[], options: ResumeOptions = {}): Promise<RemoteSubagentRun> {
    // The continuation keeps the run's runtime, tools and progress handler; its signal and trace are its own.
    const params = { runId: record.runId, prompt: content, ...(record.onEvent ? { stream: true } : {}), ...continuationTrace(options.traceparent, this.daemonProtocol) };
    return this.openRun(record.runtime, options.signal, record.tools, record.onEvent, (token) =>
      this.channel.request(ResumeRequest, params, {
        token,
        ...timeout(this.options.startTimeoutMs),
      }),
    );
  }

  private async waitRun(record: RunRecord): Promise<SubagentResult> {
    // Reconnecting settles the run either way (re-attached, or failed when it gives up).
    if (this.connection.recovering) return record.result;
    try {
      const result = await this.channel.request(WaitRequest, { runId: record.runId });
      record.resolve(result);
      return result;
    } catch (error) {
      if (this.connection.mayRecover(error)) return record.result;
      // A draining daemon handed the run on. With reconnect, the re-attach waits on the next
      // daemon and settles the record; without it, that truth is the run's outcome here.
      if (isHandedOver(error)) {
        if (this.connection.reconnectsLater()) return record.result;
        record.fail(error);
      }
      throw error;
    }
  }

  /** Our handlers on a connection, the first or a re-dial's, before it listens. */
  private listenTo(channel: RpcChannel): void {
    serveDaemonNotifications(channel, {
      events: this.events,
      directory: this.directory,
      local: this.local,
      runs: this.runs,
      logger: this.logger,
      children: () => this.children,
      startProgress: (token) => this.startProgress.get(token),
    });
    serveDaemonRequests(channel, this.runs, this.logger, this.options.onPermission);
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function timeout(ms: number | undefined): { timeoutMs?: number } {
  return ms === undefined ? {} : { timeoutMs: ms };
}
