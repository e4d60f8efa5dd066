/**
 * One client's connection: the guarded reader in front of vscode-jsonrpc, every request handler
 * (validated before it runs), disconnect-to-cancel, and the daemon → client calls its runs make.
 *
 * Over 400 lines on purpose: the handlers, the held start replies, the backlog and the calls back
 * all act on one connection's state (the library connection, the writer's count, the open
 * requests); split apart, each piece would take that state as arguments and the rules between
 * them (a start's events wait for its reply; a full backlog pauses the reader) would be spread out.
 */
import type { Readable, Writable } from 'node:stream';
import type { Logger } from 'pino';
import type { CancellationToken, MessageConnection, NotificationType, RequestType, ResponseError } from 'vscode-jsonrpc/node';
import { jsonrpc } from '../../protocol/jsonrpc-runtime.js';
import {
  AttachRequest,
  CancelRequest,
  CLOSING_MESSAGE_PREFIX,
  ChildAttachRequest,
  ChildInterruptRequest,
  ChildListRequest,
  ChildReportNotification,
  ChildSendRequest,
  ChildSettledNotification,
  ChildStartRequest,
  DisposeRequest,
  EndNotification,
  GcRequest,
  InitializeRequest,
  LspExitNotification,
  LspInitializedNotification,
  LspShutdownRequest,
  InspectRequest,
  JSONRPC_ERRORS,
  PermissionRequest,
  PROTOCOL_VERSION,
  speaksOurMajor,
  minorOf,
  ProviderAddedNotification,
  ProviderRemovedNotification,
  ProvidersListRequest,
  ResumeRequest,
  SessionLogRequest,
  RunEventNotification,
  RunsListRequest,
  SendMessageRequest,
  ShutdownRequest,
  OperatorCancelRequest,
  StartNotification,
  StartProgressNotification,
  RUN_EVENT_SINCE_MINOR,
  StartRequest,
  StatusRequest,
  SUBAGENT_ERROR_CODES,
  SubagentError,
  ToolCallRequest,
  WaitRequest,
  invalidParams,
  type ChildReportParams,
  type DeferredFrame,
  type ChildSettledParams,
  type EndParams,
  type InitializeParams,
  type GcResult,
  type SessionLogResult,
  type UiResult,
  UiRequest,
  type InitializeResult,
  type RunInfo,
  type PermissionParams,
  type PermissionResult,
  type ProgressToken,
  type RunEvent,
  type RunEventParams,
  type StatusResult,
  type SubagentErrorData,
  type SubagentStartEvent,
  type ToolCallParams,
  type ToolCallResult,
  type WireNotification,
  type WireRequest,
} from '../../protocol/index.js';
import { describeProvider } from '../provider.js';
import type { RunOwner, StartAnswer, StartExtras, SubagentService } from '../service/subagent-service.js';
import type { ChildSubscriber, ContinuableChildren } from '../service/children.js';
import { CountingWriter } from './counting-writer.js';
import { DirectLane, type LateCancel } from './direct-lane.js';
import type { PollSpin } from './poll-spin.js';
import { RunEventBatch } from './event-batch.js';
import { ProgressBacklog } from './progress-backlog.js';
import { GuardedMessageReader, type FrameLimits, type Violation } from './guarded-reader.js';
import type { PreAuthBudget, PreAuthPeer } from './pre-auth-budget.js';
import { tokensEqual } from '../../common/daemon-token.js';

export interface ConnectionContext {
  readonly service: SubagentService;
  readonly children: ContinuableChildren;
  readonly identity: InitializeResult['daemon'];
  readonly limits: FrameLimits;
  /** When set, `initialize` must present this token. */
  readonly token: string | undefined;
  /** Unsent notifications past which streamed progress waits in a coalescing backlog. */
  readonly maxPendingNotifications: number;
  /** How long a new connection may take to call `initialize` before it is closed. */
  readonly initializeTimeoutMs: number;
  /** Bounds what the daemon holds for this connection until its `initialize` is accepted. */
  readonly preAuth?: PreAuthBudget;
  /** Unanswered requests plus unsent messages past which the client's input is held until it reads. */
  readonly maxUnsentBeforePause: number;
  /** Unsent notifications past which the client is cut off as not reading. */
  readonly maxUnsentBeforeCutoff: number;
  /** Bytes of streamed progress kept for a slow reader; past them the reader is cut off. */
  readonly maxBacklogBytes: number;
  /**
   * Bytes written and not yet taken by the socket past which the client is cut off as not
   * reading. Streamed progress waits in the backlog from 1/8 of it; input is held from 1/2.
   */
  readonly maxUnsentBytes: number;
  /**
   * Runs before each write to this client: the daemon writes its pending run records there, so a
   * client never holds a token or a result that a crash could lose (write-ahead).
   */
  readonly beforeWrite?: () => void;
  /** The daemon's poll spin (poll-spin.ts), told when this client is heard from and when it is answered. */
  readonly spin?: PollSpin;
  status(): StatusResult;
  shutdown(drain: boolean, timeoutMs: number): void;
  /** Applies retention now (daemon/gc). */
  gc(): GcResult;
  /** `daemon/session`: any run's stored session log (the operator's read). */
  sessionLog(runId: string): Promise<SessionLogResult>;
  /** `daemon/ui`: the web view's one-time URL (daemon/ui/, loaded at the first ask). */
  openUi?(): Promise<UiResult>;
  readonly log: Logger;
}

/** The signal of a request whose handler never looks at one. */
const NEVER_ABORTED = new AbortController().signal;

/** Violations logged per connection before they are only counted. */
const LOGGED_VIOLATIONS = 3;

export class ClientConnection implements RunOwner, StartAnswer, ChildSubscriber, PreAuthPeer {
  private readonly rpc: MessageConnection;
  private readonly writer: CountingWriter;
  private readonly log: Logger;
  private initialized = false;
  private closed = false;
  private violations = 0;
  private readonly backlog: ProgressBacklog;
  private readonly reader: GuardedMessageReader;
  /** Starts and disposes served as they are read (direct-lane.ts); the rest through the library. */
  private readonly direct: DirectLane;
  /** Requests handed to the library and not yet answered, by id (a client may reuse ids). */
  private readonly openRequests = new Map<string | number | null, number>();
  private openCount = 0;
  /** Runs whose start or resume reply is not yet written, and what waits for it (StartAnswer). */
  private readonly unanswered = new Map<string, () => void>();
  private holding = false;
  /** Stops counting this connection against the pre-auth budget (once accepted). */
  private releasePreAuth: () => void = () => undefined;
  private readonly unsubscribe: () => void;
  private readonly closedPromise: Promise<void>;
  private resolveClosed!: () => void;
  clientName = 'unknown';
  /**
   * The client's protocol minor: run event kinds added later (RUN_EVENT_SINCE_MINOR: `retry` 1.1,
   * `model-wait` 1.5, `queued`/`agent-starting` 1.6) are not sent to it; its schema would refuse them.
   */
  private clientMinor = Number.POSITIVE_INFINITY;
  /** Whether the client's protocol knows RunInfo's `worker` (1.3 and later); its closed schema would refuse it before. */
  private takesWorker = true;
  /** Whether the client's protocol knows `worker.workspaces` (1.5 and later); WorkerRef was closed before. */
  private takesWorkspaces = true;
  /** Whether the client takes a start or resume reply as that run's `subagent/start` notice (1.3 and later). */
  private startInReply = true;
  /** Whether the client reads a run's end output from `result` alone (1.4 and later): no `lastAssistantMessage` copy. */
  private endOutputOnce = true;
  /** Set for clients of 1.3 and later: their run events leave in `run/events` batches. */
  private batch: RunEventBatch | undefined;

  constructor(
    readonly id: string,
    input: Readable,
    output: Writable,
    private readonly ctx: ConnectionContext,
    private readonly destroy: () => void,
  ) {
    this.log = ctx.log.child({ conn: id });
    this.closedPromise = new Promise((resolve) => (this.resolveClosed = resolve));
    this.backlog = new ProgressBacklog(ctx.maxBacklogBytes);
    this.writer = new CountingWriter(
      output,
      (written) => {
        if (written && 'id' in written && !('method' in written)) this.answered(written as { id: string | number | null });
        this.balanceLoad();
      },
      {
        maxUnsentBytes: ctx.maxUnsentBytes,
        onOverLimit: (bytes) => void this.close(`client stopped reading: ${bytes} bytes unsent, at the ${ctx.maxUnsentBytes}-byte bound`),
      },
      {
        ...(ctx.beforeWrite && { beforeWrite: ctx.beforeWrite }),
        // Batched events queued before any later message keep their place in the order (event-batch.ts).
        beforeMessage: () => this.batch?.flush(),
        queued: (message) => {
          if (this.unanswered.size > 0 && 'id' in message && !('method' in message)) this.handedOver(message as { result?: { runId?: unknown } });
        },
        // The reply being written still counts: more than it open means the client is not idle.
        atOnce: () => this.openCount <= 1,
        ...(ctx.spin && { waitedOn: ctx.spin.answered }),
      },
    );
    this.reader = new GuardedMessageReader(
      input,
      ctx.limits,
      (violation) => this.onViolation(violation),
      (id) => {
        this.openRequests.set(id, (this.openRequests.get(id) ?? 0) + 1);
        this.openCount += 1;
        this.balanceLoad();
      },
      (message) => !this.closed && this.direct.take(message),
    );
    this.direct = new DirectLane((reply) => this.writeRaw(reply));
    this.rpc = jsonrpc.createMessageConnection(
      this.reader,
      this.writer,
      {
        error: (message) => this.log.error(message),
        warn: (message) => this.log.warn(message),
        info: (message) => this.log.debug(message),
        log: (message) => this.log.trace(message),
      },
      {
        messageStrategy: {
          handleMessage: (message, next) => {
            this.direct.dispatched(message);
            return next(message);
          },
        },
      },
    );
    this.bindHandlers();
    this.rpc.onClose(() => void this.close('peer closed the stream'));
    this.rpc.onError(([error]) => this.log.debug({ err: error }, 'transport error'));
    this.unsubscribe = ctx.service.registry.onChange((change) => {
      if (!this.initialized) return;
      if (change.kind === 'added') this.notify(ProviderAddedNotification, { provider: describeProvider(change.provider) });
      else this.notify(ProviderRemovedNotification, { name: change.name });
    });
    // Before the reader's listener: a peer over its pre-auth bound is cut off before more is split.
    const preAuth = ctx.preAuth;
    if (preAuth) {
      const count = (chunk: Buffer): void => {
        if (this.initialized || this.closed) input.off('data', count);
        else preAuth.add(this, chunk.length);
      };
      input.on('data', count);
      void this.closedPromise.then(() => preAuth.release(this));
      this.releasePreAuth = () => {
        input.off('data', count);
        preAuth.release(this);
      };
    }
    this.rpc.listen();
    // After the reader's own listener, so it never starts the stream flowing early.
    if (ctx.spin) input.on('data', ctx.spin.heard);
    // A connection that never says who it is holds a slot (and keeps an idle daemon up): bound it.
    const deadline = setTimeout(() => {
      if (!this.initialized) this.closeWithFarewell(`no initialize within ${ctx.initializeTimeoutMs} ms`);
    }, ctx.initializeTimeoutMs);
    deadline.unref();
    void this.closedPromise.then(() => clearTimeout(deadline));
  }

  get open(): boolean {
    return !this.closed;
  }

  /** Whether its `initialize` was accepted (with the token, where one is required). */
  get authenticated(): boolean {
    return this.initialized;
  }

  /**
   * PreAuthPeer: closed before it was accepted (over a pre-auth bound, or displaced at a
   * listener's cap). Nothing more is read from it; the reason goes out as a farewell.
   */
  evict(reason: string): void {
    if (this.closed) return;
    this.reader.abandon();
    this.closeWithFarewell(reason, 'before initialize: ');
  }

  get whenClosed(): Promise<void> {
    return this.closedPromise;
  }

  /** Close once: stop the library (pending daemon → client requests reject), then drop the runs. */
  async close(reason: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Events admitted before the close go out like the messages written before them.
    this.batch?.flush();
    this.log.info({ reason, client: this.clientName }, 'connection closed');
    this.unsubscribe();
    // No reply will be written any more: nothing holds the runs that waited for one.
    for (const then of this.unanswered.values()) then();
    this.unanswered.clear();
    // Let what is already queued (a last reply, a final subagent/end) reach a reader that reads.
    await this.writer.drained(1000);
    this.rpc.dispose();
    this.destroy();
    try {
      await this.ctx.service.ownerGone(this);
    } finally {
      this.resolveClosed();
    }
  }

  /**
   * A peer that does not read what we write is not read either: past the bound, its requests
   * wait in the kernel instead of piling replies up in this process.
   */
  private balanceLoad(): void {
    const load = this.openCount + this.writer.unsent;
    const bytes = this.writer.unsentBytes;
    const limit = this.ctx.maxUnsentBeforePause;
    const holdBytes = this.ctx.maxUnsentBytes / 2;
    if (!this.holding && (load >= limit || bytes >= holdBytes)) {
      this.holding = true;
      this.log.warn({ client: this.clientName, load, bytes }, 'client is not reading its replies: holding its input');
      this.reader.hold();
    } else if (this.holding && load <= limit / 2 && bytes <= holdBytes / 2) {
      this.holding = false;
      this.reader.release();
    }
  }

  /**
   * A reply that hands over a run (start, resume: it names the runId) has its place in the
   * outgoing order: that run's events and end may follow it, in the same write when they come
   * this turn. Run after the writer's call returns: the release settles runs, which write too.
   */
  private handedOver(reply: { result?: { runId?: unknown } }): void {
    const runId = reply.result?.runId;
    if (typeof runId !== 'string') return;
    const then = this.unanswered.get(runId);
    if (!then) return;
    this.unanswered.delete(runId);
    // A promise job, not queueMicrotask: that one wraps each callback in an async resource (~1 us).
    void Promise.resolve().then(then);
  }

  /** A reply went out: only replies to requests we handed over count (not framing errors). */
  private answered(reply: { id: string | number | null }): void {
    const id = reply.id;
    const n = this.openRequests.get(id);
    if (n === undefined) return;
    if (n <= 1) this.openRequests.delete(id);
    else this.openRequests.set(id, n - 1);
    this.openCount -= 1;
  }

  private onViolation(violation: Violation): void {
    this.violations += 1;
    if (this.violations <= LOGGED_VIOLATIONS) {
      this.log.warn({ violation, client: this.clientName }, 'bad input from client');
    } else if (this.violations === LOGGED_VIOLATIONS + 1) {
      this.log.warn('further bad input from this client is counted, not logged');
    }
    if (violation.kind === 'dropped') return;
    if (violation.kind === 'reply') {
      this.writeRaw({
        jsonrpc: '2.0',
        id: violation.id,
        error: { code: violation.code, message: violation.message, ...(violation.data && { data: violation.data }) },
      });
      return;
    }
    // The bytes that follow can't be framed.
    this.closeWithFarewell(violation.message, 'untrustworthy framing: ');
  }

  /**
   * Close, first telling the client why: an error with id null whose message starts "closing: "
   * (the client library turns it into the reason of its DAEMON_UNAVAILABLE error).
   */
  private closeWithFarewell(reason: string, logPrefix = ''): void {
    const farewell = { jsonrpc: '2.0', id: null, error: { code: JSONRPC_ERRORS.INVALID_REQUEST, message: `${CLOSING_MESSAGE_PREFIX}${reason}` } };
    void this.writer.write(farewell as never).then(() => this.close(`${logPrefix}${reason}`));
  }

  private writeRaw(message: object): void {
    this.writer.write(message as never).catch(() => undefined);
  }

  // --- RunOwner: the daemon → client side of this connection's runs -----------------------------

  /** StartAnswer: `then` runs once the reply naming `runId` is queued to be written (or the connection closes). */
  whenSent(runId: string, then: () => void): void {
    if (this.closed) then();
    else this.unanswered.set(runId, then);
  }

  notifyStart(event: SubagentStartEvent, answeredBy?: StartAnswer): void {
    // A 1.3 client reads the start notice from the reply that hands it the run: one message less.
    if (answeredBy === this && this.startInReply) return;
    this.notify(StartNotification, event);
  }

  notifyEnd(event: EndParams): void {
    // Progress that waited for this slow reader goes out before the run's end (a batch is
    // written before the end: see beforeMessage).
    for (const waiting of this.backlog.take(event.runId)) this.sendRunEvent(event.runId, waiting);
    // A 1.4 client takes lastAssistantMessage from result.output: the output crosses the wire once.
    if (this.endOutputOnce && event.result !== undefined && event.lastAssistantMessage !== undefined) {
      const { lastAssistantMessage: _repeated, ...once } = event;
      this.notify(EndNotification, once);
    } else this.notify(EndNotification, event);
  }

  notifyChildSettled(params: ChildSettledParams): void {
    this.notify(ChildSettledNotification, params);
  }

  notifyChildReport(params: ChildReportParams): void {
    this.notify(ChildReportNotification, params);
  }

  notifyRunEvent(event: RunEventParams): void {
    if ((RUN_EVENT_SINCE_MINOR[event.event.kind] ?? 0) > this.clientMinor) return;
    // A reader that falls behind gets progress coalesced and bounded; lifecycle is never held back.
    const behind = this.writer.unsent >= this.ctx.maxPendingNotifications || this.writer.unsentBytes >= this.ctx.maxUnsentBytes / 8;
    if (behind || this.backlog.size > 0) {
      if (this.closed || this.backlog.push(event.runId, event.event)) return;
      const waiting = this.writer.unsentBytes + this.backlog.waitingBytes;
      void this.close(`client stopped reading: ${waiting} bytes of replies and progress waiting, past the ${this.ctx.maxBacklogBytes}-byte progress backlog`);
      return;
    }
    this.sendRunEvent(event.runId, event.event);
  }

  /** One event, in this turn's `run/events` batch (1.3 and later) or as its own `run/event`. */
  private sendRunEvent(runId: string, event: RunEvent): void {
    if (this.closed) return;
    if (this.batch) this.batch.add(runId, event);
    else this.notify(RunEventNotification, { runId, event });
  }

  /** A batch of events (its JSON, or a frame built when the client reads), held to the same cutoff as every notification. */
  private sendBatch(batch: string | DeferredFrame): void {
    // The batch close() flushes is written whatever the count: the close is already under way.
    if (!this.closed && this.cutOff()) return;
    void (typeof batch === 'string' ? this.writer.writeJson(batch) : this.writer.writeFrame(batch)).then(() => this.flushBacklog());
  }

  /** True (and the connection closing) once the client has left too many messages unread. */
  private cutOff(): boolean {
    if (this.writer.unsent < this.ctx.maxUnsentBeforeCutoff) return false;
    void this.close(`client stopped reading: ${this.writer.unsent} messages unsent`);
    return true;
  }

  /**
   * This connection answers its starts (StartAnswer); a start that gave a token is also told
   * where it stands with `$/progress` (lifecycle-like: never held back).
   */
  private startExtras(token: ProgressToken | undefined): StartExtras {
    return token === undefined
      ? (this.answersStarts ??= { answer: this })
      : { answer: this, progress: (value) => this.notify(StartProgressNotification, { token, value }) };
  }

  /** The extras of a start without a progress token: one per connection, not one per start. */
  private answersStarts: StartExtras | undefined;

  private notify<P>(type: WireNotification<P>, params: P): void {
    if (this.closed || this.cutOff()) return;
    // The library's overloads do not resolve for a generic P: an upcast to `unknown` params.
    const declared: NotificationType<unknown> = type;
    this.rpc.sendNotification(declared, params).then(
      () => this.flushBacklog(),
      () => this.flushBacklog(),
    );
  }

  private flushBacklog(): void {
    const room = Math.floor(this.ctx.maxPendingNotifications / 2) - this.writer.unsent;
    if (room <= 0 || this.backlog.size === 0 || this.closed) return;
    if (this.batch) {
      for (const [runId, event] of this.backlog.takeSome(room)) this.batch.add(runId, event);
      this.batch.flush();
      return;
    }
    for (const [runId, event] of this.backlog.takeSome(room)) {
      this.rpc.sendNotification(RunEventNotification, { runId, event }).then(
        () => this.flushBacklog(),
        () => this.flushBacklog(),
      );
    }
  }

  callTool(params: ToolCallParams, signal: AbortSignal): Promise<ToolCallResult> {
    return this.call(ToolCallRequest, params, signal);
  }

  askPermission(params: PermissionParams, signal: AbortSignal): Promise<PermissionResult> {
    return this.call(PermissionRequest, params, signal);
  }

  /** A daemon → client request; the client's answer is checked against the declaration. */
  private async call<P, R>(type: WireRequest<P, R>, params: P, signal: AbortSignal): Promise<R> {
    const source = new jsonrpc.CancellationTokenSource();
    const onAbort = (): void => source.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      // The library's overloads do not resolve for a generic P and R: an upcast to `unknown`.
      const declared: RequestType<unknown, unknown, SubagentErrorData> = type;
      const result = await this.rpc.sendRequest(declared, params, source.token);
      const answer = type.readResult(result);
      if (!answer.ok) throw new Error(`client answered ${type.method} with an invalid result: ${answer.failure.message}`);
      return answer.value;
    } finally {
      signal.removeEventListener('abort', onAbort);
      source.dispose();
    }
  }

  // --- Requests, client → daemon ----------------------------------------------------------------

  private bindHandlers(): void {
    const service = this.ctx.service;
    this.handle(InitializeRequest, (params) => this.initialize(params), false);
    // LSP's session end, for LSP-style clients: answer `shutdown` (only `daemon/shutdown` stops
    // the daemon), close this connection on `exit`, and take `initialized` as said.
    this.handle(LspShutdownRequest, () => null);
    this.rpc.onNotification(LspExitNotification, () => void this.close('the client sent exit'));
    this.rpc.onNotification(LspInitializedNotification, () => undefined);
    this.handle(ProvidersListRequest, () => ({ providers: service.registry.all().map(describeProvider) }));
    // The two requests every run makes skip the library's queue when they can (direct-lane.ts).
    // A start is answered once ready; a `$/cancelRequest` read after that answer cancels its run.
    const lateCancel = (result: unknown): void => {
      const runId = (result as { runId?: unknown } | null)?.runId;
      if (typeof runId === 'string') service.cancel(runId, this, 'now').catch((error: unknown) => this.log.debug({ err: error, runId }, 'late cancel of a start found no running run'));
    };
    this.handle(StartRequest, (params, signal) => service.start(params, this, signal, this.startExtras(params.progressToken)), true, 'direct', lateCancel);
    this.handle(CancelRequest, async ({ runId, level }) => (await service.cancel(runId, this, level), {}));
    this.handle(DisposeRequest, async ({ runId }) => (await service.dispose(runId, this), {}), true, 'direct');
    this.handle(SendMessageRequest, async ({ runId, content }) => (await service.sendMessage(runId, this, content), {}));
    this.handle(ResumeRequest, ({ runId, prompt, stream, traceparent }) =>
      service.resume(runId, this, prompt, stream === true, { answer: this, ...(traceparent !== undefined && { traceparent }) }),
    );
    this.handle(WaitRequest, ({ runId }) => service.wait(runId, this));
    this.handle(AttachRequest, async ({ runId, runToken, stream }) => this.fitRun(await service.attach(runId, runToken, this, stream)));
    this.handle(RunsListRequest, async (params) => {
      const page = await service.list(this, params);
      return this.takesWorkspaces ? page : { ...page, runs: page.runs.map((run) => this.fitInfo(run)) };
    });
    this.handle(InspectRequest, async ({ runId, runToken }) => this.fitRun(await service.inspect(runId, this, runToken)));
    this.handle(StatusRequest, () => this.ctx.status());
    const children = this.ctx.children;
    this.handle(ChildStartRequest, (params, signal) => children.start(params, this, signal));
    this.handle(ChildSendRequest, (p) => children.send(p.ownerKey, p.childId, p.from, p.message, this, p.traceparent));
    this.handle(ChildInterruptRequest, (p) => (children.interrupt(p.ownerKey, p.childId, p.by, p.level ?? 'now', this), {}));
    this.handle(ChildListRequest, (p) => children.list(p.ownerKey, p.of, p.scope ?? 'children', this));
    this.handle(ChildAttachRequest, (p) => ({ delivered: children.attach(p.ownerKey, this) }));
    this.handle(GcRequest, () => this.ctx.gc());
    this.handle(SessionLogRequest, ({ runId }) => this.ctx.sessionLog(runId));
    this.handle(UiRequest, () => {
      if (!this.ctx.openUi) throw new SubagentError('UNSUPPORTED_OPERATION', 'this daemon serves no web view (a stdio or embedded daemon)');
      return this.ctx.openUi();
    });
    this.handle(OperatorCancelRequest, async ({ runId, level }) => {
      await service.cancelAsOperator(runId, level);
      this.log.info({ runId, level: level ?? 'now', client: this.clientName }, 'run cancelled by an operator');
      return {};
    });
    this.handle(ShutdownRequest, ({ drain, timeoutMs }) => {
      this.log.info({ drain, timeoutMs, client: this.clientName }, 'shutdown requested');
      setImmediate(() => this.ctx.shutdown(drain === true, timeoutMs ?? 30_000));
      return {};
    });
  }

  private initialize(params: InitializeParams): InitializeResult {
    if (this.initialized) throw new SubagentError('INVALID_REQUEST', 'initialize was already called on this connection');
    // An LSP-style client (it sends `capabilities`) keeps our fields in initializationOptions and
    // may leave out the version (then it means ours) and clientInfo.
    const lsp = params.capabilities !== undefined;
    const options = params.initializationOptions ?? {};
    const version = params.protocolVersion ?? options.protocolVersion ?? (lsp ? PROTOCOL_VERSION : undefined);
    if (version === undefined) {
      throw new SubagentError('INVALID_REQUEST', 'invalid params for initialize: protocolVersion is required (or capabilities, for an LSP-style client)', {
        field: '/protocolVersion',
      });
    }
    if (params.clientInfo === undefined && !lsp) {
      throw new SubagentError('INVALID_REQUEST', 'invalid params for initialize: clientInfo is required', { field: '/clientInfo' });
    }
    if (!speaksOurMajor(version)) {
      throw new SubagentError(
        'PROTOCOL_VERSION',
        `protocol version mismatch: client speaks ${version}, daemon speaks ${PROTOCOL_VERSION}`,
        { clientVersion: version, daemonVersion: PROTOCOL_VERSION },
      );
    }
    if (this.ctx.token !== undefined && !tokensEqual(params.token ?? options.token, this.ctx.token)) {
      throw new SubagentError('UNAUTHORIZED', 'missing or wrong daemon token: read it from the token file beside the socket');
    }
    this.initialized = true;
    this.releasePreAuth();
    this.clientMinor = minorOf(version);
    this.takesWorker = minorOf(version) >= 3;
    this.takesWorkspaces = minorOf(version) >= 5;
    this.startInReply = minorOf(version) >= 3;
    this.endOutputOnce = minorOf(version) >= 4;
    // Batches replace a notification rather than add to one: only a client that said 1.3 or later
    // gets them, never an LSP-style one that states no version (it may be listening for run/event).
    const stated = params.protocolVersion ?? options.protocolVersion;
    if (stated !== undefined && minorOf(stated) >= 3) {
      this.batch = new RunEventBatch({
        send: (json) => this.sendBatch(json),
        backedUp: () => this.writer.backedUp,
        sendDeferred: (frame) => this.sendBatch(frame),
      });
    }
    const client = params.clientInfo ?? { name: 'lsp-client' };
    this.clientName = `${client.name}@${client.version ?? '?'}`;
    this.log.info({ client: this.clientName, lsp }, 'client initialized');
    return {
      protocolVersion: PROTOCOL_VERSION,
      daemon: this.ctx.identity,
      providers: this.ctx.service.registry.all().map(describeProvider),
      ...(lsp && { capabilities: {} }),
      features: { continuableChildren: true },
    };
  }

  /**
   * Serves one declared request: params are checked against the declaration before the handler
   * runs (INVALID_REQUEST naming the field), the result after it (a result that fails is this
   * daemon's bug: INTERNAL_ERROR, logged), and a SubagentError is answered with its code.
   * With `lane: 'direct'` the same serve also answers it as it is read, when it can (direct-lane.ts).
   */
  private handle<P, R>(
    type: WireRequest<P, R>,
    handler: (params: P, signal: AbortSignal) => R | Promise<R>,
    requiresInitialize = true,
    lane: 'library' | 'direct' = 'library',
    /** On the direct lane: what a `$/cancelRequest` read after the answer does (direct-lane.ts). */
    lateCancel?: LateCancel,
  ): void {
    const method = type.method;
    // The library's HandlerResult is conditional on R and does not resolve for a generic R: the
    // declaration is registered as answering `unknown` (an upcast; the result is checked below).
    const registered: RequestType<unknown, unknown, SubagentErrorData> = type;
    // Only handlers that take the signal (the starts) get an AbortController tied to the token.
    const takesSignal = handler.length >= 2;
    // `cancel`: the library's token for the request, or the direct lane's own signal for it.
    const serve = async (raw: unknown, cancel: CancellationToken | AbortSignal): Promise<unknown> => {
      try {
        if (requiresInitialize && !this.initialized) {
          throw new SubagentError('NOT_INITIALIZED', `call initialize before ${method}`);
        }
        const params = type.readParams(raw ?? {});
        if (!params.ok) throw invalidParams(method, params.failure);
        let result: R;
        if (!takesSignal) result = await handler(params.value, NEVER_ABORTED);
        else if (cancel instanceof AbortSignal) result = await handler(params.value, cancel);
        else {
          const abort = new AbortController();
          // A cancel read before this request was dispatched is already on the token, and the
          // library reports it to a listener only a timer turn later: by then a quick start has
          // published its child. Look at the token now, then listen for a later cancel.
          if (cancel.isCancellationRequested) abort.abort();
          const subscription = cancel.onCancellationRequested(() => abort.abort());
          try {
            result = await handler(params.value, abort.signal);
          } finally {
            subscription.dispose();
          }
        }
        const wrong = type.checkResult(result);
        if (wrong) {
          // A published run this reply would have handed over is released, not held until the
          // connection closes: its events and end then follow an error the client can act on.
          const runId = (result as { runId?: unknown } | undefined)?.runId;
          const held = typeof runId === 'string' ? this.unanswered.get(runId) : undefined;
          if (held) {
            this.unanswered.delete(runId as string);
            held();
          }
          throw new Error(`the daemon produced an invalid result: ${wrong.message}`);
        }
        return result;
      } catch (error) {
        return this.toResponseError(method, error);
      }
    };
    this.rpc.onRequest(registered, serve);
    if (lane === 'direct') this.direct.add(method, serve, lateCancel);
  }

  /** A reply carrying one run's info, as this client's protocol minor can take it. */
  private fitRun<T extends { run: RunInfo }>(reply: T): T {
    return this.takesWorkspaces ? reply : { ...reply, run: this.fitInfo(reply.run) };
  }

  private fitInfo(run: RunInfo): RunInfo {
    if (!this.takesWorker) return withoutWorker(run);
    if (run.worker?.workspaces === undefined) return run;
    const { workspaces: _workspaces, ...worker } = run.worker;
    return { ...run, worker };
  }

  private toResponseError(method: string, error: unknown): ResponseError<SubagentErrorData> {
    if (error instanceof SubagentError) {
      return new jsonrpc.ResponseError(SUBAGENT_ERROR_CODES[error.code], error.message, error.data);
    }
    this.log.error({ err: error, method }, 'request handler failed');
    const message = error instanceof Error ? error.message : String(error);
    return new jsonrpc.ResponseError<SubagentErrorData>(JSONRPC_ERRORS.INTERNAL_ERROR, `${method} failed: ${message}`);
  }
}

function withoutWorker(run: RunInfo): RunInfo {
  const { worker: _worker, ...rest } = run;
  return rest;
}
