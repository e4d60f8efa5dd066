/**
 * `SubagentService` over a daemon connection. Harness code uses it exactly like the in-process
 * service: daemon providers and client-local providers share one namespace, runs come back as
 * seam `SubagentRun`s, and lifecycle events arrive through `on`.
 */
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import {
  CancelRequest,
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
  StartRequest,
  SubagentError,
  WaitRequest,
  type ClientToolDeclaration,
  type ContentBlock,
  type DaemonIdentity,
  type InitializeParams,
  type ProviderDescriptor,
  type RunEvent,
  type StartParams,
  type StartResult,
  type SubagentResult,
  type SubagentRun,
} from '../protocol/index.js';
import { EventHub } from './event-hub.js';
import { LocalProviders } from './local-providers.js';
import { toParentRef } from './parent-ref.js';
import { ProviderDirectory } from './provider-directory.js';
import { DaemonOps } from './daemon-ops.js';
import type { RpcChannel } from './rpc-channel.js';
import { createRunHandle, type RunControls } from './run-handle.js';
import { RunRecord } from './run-record.js';
import { RunTable } from './run-table.js';
import { serveDaemonRequests } from './daemon-requests.js';
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
  readonly clientInfo: InitializeParams['clientInfo'];
  readonly token?: string;
  /** Deadline for control requests (initialize, providers/list, run/cancel, run/dispose, run/sendMessage). */
  readonly requestTimeoutMs?: number;
  /** Deadline for readiness (`subagent/start`, `run/resume`); none unless set. */
  readonly startTimeoutMs?: number;
  readonly logger: ClientLogger;
  readonly onPermission?: PermissionHandler;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class RemoteSubagentService {
  private readonly events: EventHub;
  private readonly directory: ProviderDirectory;
  private readonly local: LocalProviders;
  private readonly runs = new RunTable();
  private readonly logger: ClientLogger;
  private identity: DaemonIdentity | undefined;
  private opsSurface: DaemonOps | undefined;
  private daemonProtocol = '';
  private readonly controls: RunControls = {
    dispose: (record) => this.disposeRun(record),
    sendMessage: (record, content) => this.sendMessage(record, content),
    resume: (record, content) => this.resumeRun(record, content),
    wait: (record) => this.waitRun(record),
  };

  private constructor(
    private readonly channel: RpcChannel,
    private readonly options: ServiceOptions,
  ) {
    this.logger = options.logger;
    this.events = new EventHub(this.logger);
    this.directory = new ProviderDirectory(this.events);
    this.local = new LocalProviders(this.events);
    this.listenToDaemon();
    channel.onLost((error) => {
      for (const record of this.runs.drain()) record.fail(error);
    });
  }

  /** Register every handler, start reading, and perform the `initialize` handshake. */
  static async open(channel: RpcChannel, options: ServiceOptions): Promise<RemoteSubagentService> {
    const service = new RemoteSubagentService(channel, options);
    channel.listen();
    const params: Mutable<InitializeParams> = { protocolVersion: PROTOCOL_VERSION, clientInfo: options.clientInfo };
    if (options.token !== undefined) params.token = options.token;
    const answer = await channel.request(InitializeRequest, params, {
      validateAs: 'initialize#result',
      ...timeout(options.requestTimeoutMs),
    });
    if (major(answer.protocolVersion) !== major(PROTOCOL_VERSION)) {
      throw new SubagentError(
        'PROTOCOL_VERSION',
        `${channel.describe()} speaks protocol ${answer.protocolVersion}, this client ${PROTOCOL_VERSION}; upgrade the older one`,
        { daemonVersion: answer.protocolVersion, clientVersion: PROTOCOL_VERSION },
      );
    }
    service.identity = answer.daemon;
    service.daemonProtocol = answer.protocolVersion;
    service.directory.seed(answer.providers);
    return service;
  }

  /** Status, run list, inspect, attach and shutdown: the daemon's operations surface. */
  get ops(): DaemonOps {
    this.opsSurface ??= new DaemonOps(this.channel, this.options.requestTimeoutMs);
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

  /** DAEMON_UNAVAILABLE once the connection is gone, else undefined (a hook for reconnecting). */
  get disconnected(): SubagentError | undefined {
    return this.channel.gone;
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

  /** Close the connection. Pending calls and unsettled daemon runs reject with DAEMON_UNAVAILABLE. */
  close(): Promise<void> {
    return this.channel.close();
  }

  private async startRemote(name: string, request: ClientStartRequest): Promise<RemoteSubagentRun> {
    const gone = this.channel.gone;
    if (gone) throw gone;
    const descriptor = this.directory.get(name);
    if (!descriptor) {
      throw new SubagentError('NO_PROVIDER', `no provider named '${name}' (available: ${this.list().join(', ') || 'none'})`);
    }
    if (request.signal.aborted) throw new SubagentError('ABORTED', `the start of '${name}' was aborted before it was sent`);
    const tools = toolMap(request.tools);
    const params = startParams(name, descriptor, request, tools);
    return this.openRun(descriptor.runtime, request.signal, tools, request.onEvent, (token) =>
      this.channel.request(StartRequest, params, {
        token,
        validateAs: 'subagent/start#result',
        ...timeout(this.options.startTimeoutMs),
      }),
    );
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
        provider: started.provider,
        runtime,
        tools,
        onEvent,
        logger: this.logger,
      });
      record.detachSignal = () => signal?.removeEventListener('abort', onAbort);
      this.runs.add(record);
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
    this.channel
      .request(CancelRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => this.logger.error(`cancelling run ${record.runId} failed`, error));
  }

  private async disposeRun(record: RunRecord): Promise<void> {
    record.detachSignal();
    await this.channel.request(DisposeRequest, { runId: record.runId }, timeout(this.options.requestTimeoutMs));
  }

  /** The seam's `sendMessage` returns nothing, so a failure can only be reported to the logger. */
  private sendMessage(record: RunRecord, content: ContentBlock[]): void {
    this.channel
      .request(SendMessageRequest, { runId: record.runId, content }, timeout(this.options.requestTimeoutMs))
      .catch((error: unknown) => this.logger.error(`sendMessage to run ${record.runId} failed`, error));
  }

  private async resumeRun(record: RunRecord, content: ContentBlock[]): Promise<RemoteSubagentRun> {
    // The continuation keeps the run's runtime, tools and progress handler; it has no start signal.
    const params = { runId: record.runId, prompt: content, ...(record.onEvent ? { stream: true } : {}) };
    return this.openRun(record.runtime, undefined, record.tools, record.onEvent, (token) =>
      this.channel.request(ResumeRequest, params, {
        token,
        validateAs: 'subagent/start#result',
        ...timeout(this.options.startTimeoutMs),
      }),
    );
  }

  private async waitRun(record: RunRecord): Promise<SubagentResult> {
    const result = await this.channel.request(WaitRequest, { runId: record.runId }, { validateAs: 'run/wait#result' });
    record.resolve(result);
    return result;
  }

  private listenToDaemon(): void {
    const { channel } = this;
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
    channel.onNotification(EndNotification, 'subagent/end', (params) => {
      const { result: _result, error: _error, ...event } = params;
      void this.whenKnown(params.runId, (record) => record.ended(params));
      this.events.emit('subagent/end', event);
    });
    channel.onNotification(RunEventNotification, 'run/event', (params) =>
      this.whenKnown(params.runId, (record) => record.deliver(params.event)),
    );
    serveDaemonRequests(channel, this.runs, this.logger, this.options.onPermission);
  }

  /** Apply to a run's record now, or once its start answer is in; unknown runs are ignored. */
  private whenKnown(runId: string, apply: (record: RunRecord) => void): void {
    const found = this.runs.lookup(runId);
    if (found instanceof Promise) void found.then((record) => record && apply(record));
    else if (found) apply(found);
  }
}

function timeout(ms: number | undefined): { timeoutMs?: number } {
  return ms === undefined ? {} : { timeoutMs: ms };
}

function major(version: string): string {
  return version.split('.')[0] ?? version;
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
  const params: Mutable<StartParams> = {
    provider: name,
    prompt: request.prompt,
    parent: toParentRef(request.parent, { includeEvents: descriptor.inheritsParentContext }),
  };
  if (request.agentOptions !== undefined) params.agentOptions = request.agentOptions;
  if (request.outputSchema !== undefined) params.outputSchema = request.outputSchema;
  if (request.maxDepth !== undefined) params.maxDepth = request.maxDepth;
  if (request.toolFilter !== undefined) params.toolFilter = request.toolFilter;
  if (request.persona !== undefined) params.persona = request.persona;
  if (request.env !== undefined) params.env = { ...request.env };
  if (tools.size > 0) {
    params.tools = [...tools.values()].map(
      ({ name: toolName, description, inputSchema }): ClientToolDeclaration => ({ name: toolName, description, inputSchema }),
    );
  }
  if (request.onEvent) params.stream = true;
  return params;
}
