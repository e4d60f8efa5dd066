/**
 * `SubagentService` over a daemon connection. Harness code uses it exactly like the in-process
 * service: daemon providers and client-local providers share one namespace, runs come back as
 * seam `SubagentRun`s, and lifecycle events arrive through `on`. With a reconnect policy, a lost
 * connection is re-dialled and the unsettled runs are re-attached by their tokens.
 */
import { randomBytes } from 'node:crypto';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import {
  AttachRequest,
  CancelRequest,
  ChildReportNotification,
  ChildSettledNotification,
  DisposeRequest,
  EndNotification,
  InitializeRequest,
  PROTOCOL_VERSION,
  ProviderAddedNotification,
  ProviderRemovedNotification,
  ProvidersListRequest,
  ResumeRequest,
  RunEventNotification,
  SendMessageRequest,
  StartNotification,
  StartProgressNotification,
  StartRequest,
  SubagentError,
  WaitRequest,
  endEventOf,
  speaksOurMajor,
  type ClientToolDeclaration,
  type AttachResult,
  type ContentBlock,
  type DaemonIdentity,
  type InitializeParams,
  type InitializeResult,
  type ProviderDescriptor,
  type ProgressToken,
  type RunEvent,
  type StartParams,
  type ValidationFailure,
  type StartResult,
  type SubagentResult,
  type SubagentRun,
} from '../protocol/index.js';
import { EventHub } from './event-hub.js';
import { RemoteChildren } from './remote-children.js';
import { LocalProviders } from './local-providers.js';
import { commonStartFields } from './start-fields.js';
import { ProviderDirectory } from './provider-directory.js';
import { DaemonOps } from './daemon-ops.js';
import type { RpcChannel } from './rpc-channel.js';
import { createRunHandle, type RunControls } from './run-handle.js';
import { RunRecord } from './run-record.js';
import { RunTable } from './run-table.js';
import { serveDaemonRequests } from './daemon-requests.js';
import { backoffDelay, Pause, type ReconnectPolicy } from './reconnect.js';
import { invalidFromDaemon } from './wire-errors.js';
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

export interface ServiceOptions {
  readonly clientInfo: NonNullable<InitializeParams['clientInfo']>;
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

/** How a service gets a new connection: `dial` opens one (not yet listening) and says which token to present. */
export interface ReconnectSetup {
  readonly policy: ReconnectPolicy;
  readonly dial: () => Promise<{ readonly channel: RpcChannel; readonly token?: string }>;
}

/** Bounds `initialize` and `run/attach` while reconnecting when no `requestTimeoutMs` is set. */
const REATTACH_TIMEOUT_MS = 10_000;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

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
  /** The connection of the moment: replaced when the service reconnects. */
  private channel: RpcChannel;
  /** `close()` was called: a loss is final, whatever the policy. */
  private closing = false;
  /** Set from a loss until `reconnected` (or giving up): the loss it recovers from. */
  private reconnecting: SubagentError | undefined;
  /** Set once reconnecting gave up: what every later call rejects with. */
  private finalError: SubagentError | undefined;
  private readonly pause = new Pause();
  /** `onStartProgress` of each unanswered start that has one, by its `progressToken`. */
  private readonly startProgress = new Map<ProgressToken, NonNullable<ClientStartRequest['onStartProgress']>>();
  private progressTokens = 0;
  /** A re-dialled connection still in its handshake; `close()` closes it too. */
  private dialling: RpcChannel | undefined;
  /**
   * With a reconnect policy: settled runs not yet disposed, by run id. They are re-attached too,
   * so that their `dispose` and `resume` reach the daemon over the new connection.
   */
  private readonly retained = new Map<string, RunRecord>();
  private readonly controls: RunControls = {
    dispose: (record) => this.disposeRun(record),
    sendMessage: (record, content) => this.sendMessage(record, content),
    resume: (record, content, signal) => this.resumeRun(record, content, signal),
    wait: (record) => this.waitRun(record),
    mayRetryDispose: (error) => this.mayRecover(error),
  };

  private constructor(
    channel: RpcChannel,
    private readonly options: ServiceOptions,
  ) {
    this.channel = channel;
    this.logger = options.logger;
    this.events = new EventHub(this.logger);
    this.directory = new ProviderDirectory(this.events);
    this.local = new LocalProviders(this.events);
    this.listenToDaemon(channel);
    channel.onLost((error) => this.connectionLost(channel, error));
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
      service.closing = true;
      service.pause.interrupt();
      throw error;
    }
    service.identity = answer.daemon;
    service.daemonProtocol = answer.protocolVersion;
    service.directory.seed(answer.providers);
    if (answer.features?.continuableChildren === true) service.offerChildren();
    return service;
  }

  private offerChildren(): void {
    const ownerKey = this.options.ownerKey ?? randomBytes(24).toString('base64url');
    if (ownerKey.length < 16) throw new SubagentError('INVALID_REQUEST', 'ownerKey must be at least 16 characters', { field: '/ownerKey' });
    const children = new RemoteChildren({
      channel: () => this.channel,
      describe: (name) => this.directory.get(name),
      ownerKey,
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
    return this.unavailable();
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
    const answer = await this.channel.request(
      ProvidersListRequest,
      {},
      { validateAs: 'providers/list#result', ...timeout(this.options.requestTimeoutMs) },
    );
    this.directory.replace(answer.providers);
    return answer.providers;
  }

  /**
   * Close the connection (and stop reconnecting). Pending calls and unsettled daemon runs reject
   * with DAEMON_UNAVAILABLE.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.pause.interrupt();
    const channel = this.channel;
    await Promise.all([channel.close(), this.dialling?.close()]);
    // A channel lost earlier (we were reconnecting) no longer reports; fail what still waits.
    const closed = new SubagentError('DAEMON_UNAVAILABLE', `the connection to ${channel.describe()} is gone (closed by this client)`);
    for (const record of this.runs.drain()) record.fail(closed);
    this.retained.clear();
  }

  /**
   * Takes over a run by its token (one this process started before it restarted, or one an
   * earlier daemon ran) and returns a handle for it, so that its `resume` and `dispose` go
   * through this service. `onEvent` receives the streamed events of its continuations.
   */
  async adopt(runId: string, runToken: string, options: { readonly onEvent?: (event: RunEvent) => void } = {}): Promise<RemoteSubagentRun> {
    const gone = this.unavailable();
    if (gone) throw gone;
    const endStart = this.runs.beginStart();
    try {
      const { run, result } = await this.attach(this.channel, { runId, runToken, onEvent: options.onEvent });
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
      if (this.options.reconnect) this.retainOnceSettled(record);
      return createRunHandle(record, { runId, runToken, provider: run.provider, id: run.id, local: false }, this.controls);
    } finally {
      endStart();
    }
  }

  private async startRemote(name: string, request: ClientStartRequest): Promise<RemoteSubagentRun> {
    const gone = this.unavailable();
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
        this.channel.request(StartRequest, params, {
          token,
          validateAs: 'subagent/start#result',
          ...timeout(this.options.startTimeoutMs),
        }),
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
      if (this.options.reconnect) this.retainOnceSettled(record);
      // Aborted while the answer was on its way: the child is already published, so cancel it.
      if (signal?.aborted) this.cancelRun(record);
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
    if (this.reconnecting && !this.closing) {
      record.cancelOnReattach = true;
      return;
    }
    this.sendCancel(this.channel, record);
  }

  private sendCancel(channel: RpcChannel, record: RunRecord): void {
    channel
      .request(CancelRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => {
        if (this.mayRecover(error) && !record.settled) record.cancelOnReattach = true;
        else this.logger.error(`cancelling run ${record.runId} failed`, error);
      });
  }

  private async disposeRun(record: RunRecord): Promise<void> {
    record.detachSignal();
    await this.channel.request(DisposeRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs));
    this.retained.delete(record.runId);
    record.disposed = true;
  }

  /** The seam's `sendMessage` returns nothing, so a failure can only be reported to the logger. */
  private sendMessage(record: RunRecord, content: ContentBlock[]): void {
    this.channel
      .request(SendMessageRequest, { runId: record.runId, content }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => this.logger.error(`sendMessage to run ${record.runId} failed`, error));
  }

  private async resumeRun(record: RunRecord, content: ContentBlock[], signal?: AbortSignal): Promise<RemoteSubagentRun> {
    // The continuation keeps the run's runtime, tools and progress handler; its signal is its own.
    const params = { runId: record.runId, prompt: content, ...(record.onEvent ? { stream: true } : {}) };
    return this.openRun(record.runtime, signal, record.tools, record.onEvent, (token) =>
      this.channel.request(ResumeRequest, params, {
        token,
        validateAs: 'subagent/start#result',
        ...timeout(this.options.startTimeoutMs),
      }),
    );
  }

  private async waitRun(record: RunRecord): Promise<SubagentResult> {
    // Reconnecting settles the run either way (re-attached, or failed when it gives up).
    if (this.reconnecting && !this.closing) return record.result;
    try {
      const result = await this.channel.request(WaitRequest, { runId: record.runId }, { validateAs: 'run/wait#result' });
      record.resolve(result);
      return result;
    } catch (error) {
      if (this.mayRecover(error)) return record.result;
      // A draining daemon handed the run on. With reconnect, the re-attach waits on the next
      // daemon and settles the record; without it, that truth is the run's outcome here.
      if (isHandedOver(error)) {
        if (this.options.reconnect !== undefined && !this.closing && this.finalError === undefined) return record.result;
        record.fail(error);
      }
      throw error;
    }
  }

  /** What new calls reject with while there is no usable connection, else undefined. */
  private unavailable(): SubagentError | undefined {
    if (this.finalError) return this.finalError;
    if (this.reconnecting && !this.closing) {
      return new SubagentError(
        'DAEMON_UNAVAILABLE',
        `the connection to ${this.channel.describe()} is being re-established; calls work again after the 'reconnected' event (${this.reconnecting.message})`,
      );
    }
    return this.channel.gone;
  }

  /** A call failed because the connection went, and a reconnect is under way (or about to be). */
  private mayRecover(error: unknown): boolean {
    return (
      this.options.reconnect !== undefined &&
      !this.closing &&
      this.finalError === undefined &&
      error instanceof SubagentError &&
      error.code === 'DAEMON_UNAVAILABLE'
    );
  }

  private retainOnceSettled(record: RunRecord): void {
    record.onSettled(() => {
      if (!record.disposed && !this.closing && this.finalError === undefined) this.retained.set(record.runId, record);
    });
  }

  /** The handler every connection's loss reaches; only the current connection's counts. */
  private connectionLost(channel: RpcChannel, error: SubagentError): void {
    if (channel !== this.channel) return;
    // Reconnecting needs a service that was handed out (initialized) and is not being closed.
    if (this.closing || !this.options.reconnect || !this.identity) {
      for (const record of this.runs.drain()) record.fail(error);
      this.retained.clear();
      if (!this.closing) this.events.emit('disconnected', { error, reconnecting: false });
      return;
    }
    // Lost again while re-attaching: the running reconnect sees it and dials again.
    if (this.reconnecting) return;
    this.reconnecting = error;
    this.events.emit('disconnected', { error, reconnecting: true });
    void this.reconnect(this.options.reconnect, error).catch((failure: unknown) => {
      this.logger.error('reconnecting failed unexpectedly', failure);
      this.giveUp(this.channel, error, 0, failure);
    });
  }

  /**
   * Re-dial with bounded exponential backoff, re-initialize, then re-attach every unsettled run.
   * Runs keep waiting meanwhile; after `maxAttempts` failed re-dials they reject.
   */
  private async reconnect(setup: ReconnectSetup, lost: SubagentError): Promise<void> {
    const { policy } = setup;
    const lostChannel = this.channel;
    const epochBefore = this.identity?.epoch;
    let lastFailure: unknown = lost;
    let attempts = 0;
    while (attempts < policy.maxAttempts) {
      if (this.closing) return;
      attempts += 1;
      await this.pause.sleep(backoffDelay(policy, attempts));
      if (this.closing) return;
      let channel: RpcChannel;
      let answer: InitializeResult;
      try {
        ({ channel, answer } = await this.redial(setup));
      } catch (error) {
        lastFailure = error;
        this.logger.warn?.(`reconnect attempt ${attempts} of ${policy.maxAttempts} to ${lostChannel.describe()} failed: ${messageOf(error)}`);
        if (error instanceof SubagentError && error.code === 'PROTOCOL_VERSION') break;
        continue;
      }
      if (this.closing) {
        await channel.close();
        return;
      }
      const restarted = epochBefore !== undefined && answer.daemon.epoch !== epochBefore;
      this.channel = channel;
      this.identity = answer.daemon;
      this.daemonProtocol = answer.protocolVersion;
      this.directory.replace(answer.providers);
      channel.onLost((error) => this.connectionLost(channel, error));
      await this.reattachAll(channel, restarted);
      this.children?.reattach(channel);
      if (this.closing) return;
      if (channel.gone) {
        lastFailure = channel.gone;
        continue;
      }
      this.reconnecting = undefined;
      this.events.emit('reconnected', { epoch: answer.daemon.epoch, restarted, attempts });
      return;
    }
    this.giveUp(lostChannel, lost, attempts, lastFailure);
  }

  /** One re-dial: a new connection with our handlers, initialized. */
  private async redial(setup: ReconnectSetup): Promise<{ channel: RpcChannel; answer: InitializeResult }> {
    const { channel, token } = await setup.dial();
    this.dialling = channel;
    try {
      this.listenToDaemon(channel);
      channel.listen();
      const answer = await handshake(channel, this.options.clientInfo, token, this.options.requestTimeoutMs ?? REATTACH_TIMEOUT_MS);
      return { channel, answer };
    } catch (error) {
      await channel.close();
      throw error;
    } finally {
      this.dialling = undefined;
    }
  }

  private giveUp(lostChannel: RpcChannel, lost: SubagentError, attempts: number, lastFailure: unknown): void {
    if (this.closing) return;
    const last = lastFailure === lost ? '' : ` (last: ${messageOf(lastFailure)})`;
    const error = new SubagentError(
      'DAEMON_UNAVAILABLE',
      `the connection to ${lostChannel.describe()} was lost and ${attempts} reconnect attempt${attempts === 1 ? '' : 's'} failed${last}; check \`subagentd status\`, or run \`subagentd start\``,
    );
    this.finalError = error;
    this.reconnecting = undefined;
    for (const record of this.runs.drain()) record.fail(error);
    this.retained.clear();
  }

  private async reattachAll(channel: RpcChannel, restarted: boolean): Promise<void> {
    const live = this.runs.live();
    const settled = [...this.retained.values()];
    await Promise.all([
      ...live.map((record) => this.reattach(channel, record, restarted)),
      ...settled.map((record) => this.reclaim(channel, record)),
    ]);
  }

  private attach(channel: RpcChannel, record: Pick<RunRecord, 'runId' | 'runToken'> & { readonly onEvent?: unknown }): Promise<AttachResult> {
    return channel.request(
      AttachRequest,
      // A run with an event handler asks for its events again: a daemon that continued it after
      // a restart cannot know the original start streamed.
      { runId: record.runId, runToken: record.runToken, ...(record.onEvent !== undefined && { stream: true }) },
      { validateAs: 'run/attach#result', ...timeout(this.options.requestTimeoutMs ?? REATTACH_TIMEOUT_MS) },
    );
  }

  /**
   * Take an unsettled run back. Settled meanwhile (or interrupted by a daemon restart) → its
   * result resolves it; still running → `subagent/end` on this connection settles it, with
   * `run/wait` as a backstop; unknown to the daemon → it was lost.
   */
  private async reattach(channel: RpcChannel, record: RunRecord, restarted: boolean): Promise<void> {
    let answer: AttachResult;
    try {
      answer = await this.attach(channel, record);
    } catch (error) {
      // Lost again: the next round re-attaches it.
      if (record.settled || channel.gone) return;
      const code = error instanceof SubagentError ? error.code : undefined;
      const why =
        code === 'NOT_OWNER' || code === 'UNKNOWN_RUN'
          ? `${channel.describe()}${restarted ? ', which restarted,' : ''} no longer knows it`
          : `it could not be re-attached`;
      record.fail(new SubagentError('DAEMON_UNAVAILABLE', `run ${record.runId} was lost when the connection dropped: ${why} (${messageOf(error)})`));
      return;
    }
    if (record.settled) return;
    const { result } = answer;
    if (result) {
      record.resolve(result);
      // The daemon's `subagent/end` went nowhere while we were away: tell listeners now.
      this.events.emit('subagent/end', endEventOf({ runId: record.runId, provider: answer.run.provider, id: answer.run.id, local: false }, result));
      return;
    }
    if (record.cancelOnReattach) {
      record.cancelOnReattach = false;
      this.sendCancel(channel, record);
    }
    channel.request(WaitRequest, { runId: record.runId }, { validateAs: 'run/wait#result' }).then(
      (waited) => record.resolve(waited),
      (error: unknown) => {
        if (!record.settled && !channel.gone) this.logger.warn?.(`run/wait for re-attached run ${record.runId} failed`, error);
      },
    );
  }

  /** Take back a settled, undisposed run, so its dispose and resume reach the daemon; best effort. */
  private async reclaim(channel: RpcChannel, record: RunRecord): Promise<void> {
    try {
      await this.attach(channel, record);
    } catch (error) {
      if (channel.gone) return;
      this.retained.delete(record.runId);
      this.logger.warn?.(`settled run ${record.runId} could not be re-attached: ${messageOf(error)}`);
    }
  }

  private listenToDaemon(channel: RpcChannel): void {
    channel.onNotification(ProviderAddedNotification, 'subagent/provider-added', ({ provider }) => {
      if (this.local.get(provider.name)) {
        this.logger.warn?.(`the daemon added provider '${provider.name}', which a local provider of that name shadows`);
      }
      this.directory.added(provider);
    });
    channel.onNotification(ProviderRemovedNotification, 'subagent/provider-removed', ({ name }) =>
      this.directory.removed(name),
    );
    channel.onNotification(StartNotification, 'subagent/start', (params) => this.events.emit('subagent/start', params));
    channel.onNotification(StartProgressNotification, '$/progress', ({ token, value }) => this.startProgress.get(token)?.(value));
    channel.onNotification(
      EndNotification,
      'subagent/end',
      (params) => {
        const { result: _result, error: _error, ...event } = params;
        void this.whenKnown(params.runId, (record) => record.ended(params));
        this.events.emit('subagent/end', event);
      },
      (params, failure) => this.invalidEnd(params, failure),
    );
    channel.onNotification(RunEventNotification, 'run/event', (params) =>
      this.whenKnown(params.runId, (record) => record.deliver(params.event)),
    );
    channel.onNotification(ChildSettledNotification, 'child/settled', (notice) => this.children?.deliver(notice));
    channel.onNotification(ChildReportNotification, 'child/report', (report) => this.children?.deliverReport(report));
    serveDaemonRequests(channel, this.runs, this.logger, this.options.onPermission);
  }

  /**
   * A run's end that fails the inbound schema (an answer over the client's text cap, say) still
   * ends the run: its result rejects with the reason, typed, rather than waiting for ever.
   */
  private invalidEnd(params: unknown, failure: ValidationFailure): void {
    const fields = (typeof params === 'object' && params !== null ? params : {}) as Record<string, unknown>;
    const { runId, provider, id } = fields;
    if (typeof runId !== 'string') return;
    const error = invalidFromDaemon(`subagent/end for run ${runId}`, failure);
    this.whenKnown(runId, (record) => record.fail(error));
    if (typeof provider === 'string' && typeof id === 'string') {
      this.events.emit('subagent/end', { runId, provider, id, local: fields['local'] === true, stopReason: 'error' });
    }
  }

  /** Apply to a run's record now, or once its start answer is in; unknown runs are ignored. */
  private whenKnown(runId: string, apply: (record: RunRecord) => void): void {
    const found = this.runs.lookup(runId);
    if (found instanceof Promise) void found.then((record) => record && apply(record));
    else if (found) apply(found);
  }
}

function isHandedOver(error: unknown): error is SubagentError {
  return error instanceof SubagentError && error.code === 'HANDED_OVER';
}

function timeout(ms: number | undefined): { timeoutMs?: number } {
  return ms === undefined ? {} : { timeoutMs: ms };
}

/** `initialize`, and the major-version check of its answer. */
async function handshake(
  channel: RpcChannel,
  clientInfo: NonNullable<InitializeParams['clientInfo']>,
  token: string | undefined,
  timeoutMs: number | undefined,
): Promise<InitializeResult> {
  const params: Mutable<InitializeParams> = { protocolVersion: PROTOCOL_VERSION, clientInfo };
  if (token !== undefined) params.token = token;
  const answer = await channel.request(InitializeRequest, params, { validateAs: 'initialize#result', ...timeout(timeoutMs) });
  if (!speaksOurMajor(answer.protocolVersion)) {
    throw new SubagentError(
      'PROTOCOL_VERSION',
      `${channel.describe()} speaks protocol ${answer.protocolVersion}, this client ${PROTOCOL_VERSION}; upgrade the older one`,
      { daemonVersion: answer.protocolVersion, clientVersion: PROTOCOL_VERSION },
    );
  }
  return answer;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function toolMap(tools: readonly ClientTool[] | undefined): Map<string, ClientTool> {
  const map = new Map<string, ClientTool>();
  tools?.forEach((tool, index) => {
    if (map.has(tool.name)) {
      throw new SubagentError('INVALID_REQUEST', `/tools/${index}/name repeats the tool name '${tool.name}'`, {
        field: `/tools/${index}/name`,
      });
    }
    map.set(tool.name, tool);
  });
  return map;
}

/** The wire form of a start: only fields that are present, tools without their `execute`. */
function startParams(
  name: string,
  descriptor: ProviderDescriptor,
  request: ClientStartRequest,
  tools: ReadonlyMap<string, ClientTool>,
): StartParams {
  const params: Mutable<StartParams> = commonStartFields(name, descriptor, request);
  if (request.outputSchema !== undefined) params.outputSchema = request.outputSchema;
  if (tools.size > 0) {
    params.tools = [...tools.values()].map(
      ({ name: toolName, description, inputSchema }): ClientToolDeclaration => ({ name: toolName, description, inputSchema }),
    );
  }
  if (request.onEvent) params.stream = true;
  return params;
}

