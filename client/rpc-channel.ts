/**
 * One JSON-RPC connection to a daemon, with the guarantees vscode-jsonrpc leaves to its user:
 * every payload is checked against its declaration (protocol/messages.ts) — params before they
 * are sent, results and notifications as they arrive, answers to the daemon's requests before
 * they leave —, every request settles (the daemon goes away → all pending
 * calls reject with DAEMON_UNAVAILABLE; it stops answering → DAEMON_UNRESPONSIVE after the
 * caller's timeout), and later calls fail at once instead of writing into a dead socket. When the
 * daemon said why it closed the connection (its "closing: …" error with id null), that reason is
 * the DAEMON_UNAVAILABLE error's: in its message and in `data.reason`.
 *
 * The hot path: answers resolve as they are read, never ahead of an earlier message
 * (inbound-order.ts), and a run's start and dispose skip the library's request machinery
 * (direct-requests.ts); the rules above hold for them alike.
 */
import {
  CancellationTokenSource,
  ErrorCodes,
  ResponseError,
  createMessageConnection,
  type CancellationToken,
  type DataCallback,
  type Logger,
  type MessageConnection,
  type Message,
  type MessageReader,
  type NotificationMessage,
  type RequestType,
} from 'vscode-jsonrpc/node';
import {
  CLOSING_MESSAGE_PREFIX,
  DisposeRequest,
  EndNotification,
  RunEventNotification,
  RunEventsNotification,
  StartRequest,
  SubagentError,
  invalidParams,
  type SubagentErrorData,
  type ValidationFailure,
  type WireNotification,
  type WireRequest,
} from '../protocol/index.js';
import { DirectRequests } from './direct-requests.js';
import { InboundOrder } from './inbound-order.js';
import type { Transport } from './transport.js';
import type { ClientLogger } from './types.js';
import { fromWire, invalidFromDaemon, toWire } from './wire-errors.js';

export interface RequestOptions {
  /** Reject with DAEMON_UNRESPONSIVE (and cancel the request) if no answer comes in time. */
  readonly timeoutMs?: number;
  /** Cancels the request on the wire (`$/cancelRequest`); the daemon's answer still settles it. */
  readonly token?: CancellationToken;
}

/**
 * After the transport closes, messages already read may still sit in the library's queue (it
 * dispatches one per event-loop turn). Wait for them, but never longer than this.
 */
const DRAIN_CAP_MS = 250;
/** The requests every run makes: sent as direct-requests.ts says, served by the daemon's direct lane. */
const DIRECT = new Set([StartRequest.method, DisposeRequest.method]);
/**
 * The notifications a caller waits on: a run's end and its events, handled by the channel itself,
 * all of a turn's at its check phase, while nothing read before them waits in the library's queue
 * (inbound-order.ts).
 */
const PROMPT = new Set([EndNotification.method, RunEventsNotification.method, RunEventNotification.method]);
/** How long the library's close event waits for the transport's own (better) reason. */
const CLOSE_FALLBACK_MS = 400;

export class RpcChannel {
  readonly connection: MessageConnection;
  private goneReason: string | undefined;
  /** What the daemon said when it closed this connection. */
  private closingReason: string | undefined;
  private lostError: SubagentError | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  /** Inbound messages in the order read, answers not queued behind a turn (inbound-order.ts). */
  private inbound: InboundOrder | undefined;
  /** A run's start and dispose, sent and answered without the library's request machinery. */
  private readonly direct: DirectRequests;
  /** Handlers of the notifications taken as they are read (PROMPT), by method. */
  private readonly prompt = new Map<string, (params: unknown) => void>();
  private readonly pending = new Set<(error: SubagentError) => void>();
  private readonly lostListeners: Array<(error: SubagentError) => void> = [];

  constructor(
    private readonly transport: Transport,
    private readonly logger: ClientLogger,
  ) {
    this.direct = new DirectRequests(transport.writer);
    const reader = watchInbound(
      transport.reader,
      (pass) =>
        (this.inbound = new InboundOrder((message) => this.direct.take(message) || pass(message), {
          takes: (message) => this.prompt.has((message as NotificationMessage).method),
          handle: (message) => this.handlePrompt(message),
        })),
      (reason) => (this.closingReason ??= reason),
    );
    this.connection = createMessageConnection(reader, transport.writer, libraryLogger(logger), {
      // Any limit makes the library resolve answers as they are read instead of a turn later;
      // none is wanted, so it is one never reached. InboundOrder keeps them behind earlier messages.
      maxParallelism: 2 ** 31,
      messageStrategy: {
        handleMessage: (message, next) => {
          try {
            return next(message);
          } finally {
            this.inbound?.dispatched(message);
            this.checkDrained();
          }
        },
      },
    });
    this.connection.onError(([error]) => logger.error(`error on the connection to ${transport.describe()}`, error));
    // The transport says best what happened (exit code, socket error); the library's own close
    // event is only a fallback in case a transport never reports.
    transport.onClosed((reason) => this.beginLoss(reason));
    this.connection.onClose(() => {
      setTimeout(() => this.beginLoss('connection closed'), CLOSE_FALLBACK_MS).unref();
    });
  }

  listen(): void {
    this.connection.listen();
  }

  describe(): string {
    return this.transport.describe();
  }

  /** The DAEMON_UNAVAILABLE error once the daemon is gone (or is going), else undefined. */
  get gone(): SubagentError | undefined {
    if (this.lostError) return this.lostError;
    return this.goneReason === undefined ? undefined : this.unavailable(this.goneReason);
  }

  /** Called once with the DAEMON_UNAVAILABLE error, after every pending request was rejected. */
  onLost(listener: (error: SubagentError) => void): void {
    if (this.lostError) listener(this.lostError);
    else this.lostListeners.push(listener);
  }

  /**
   * Sends a declared request. Params that fail the declaration reject at once with the
   * INVALID_REQUEST the daemon would answer; a result that fails it rejects with INVALID_REQUEST
   * naming the field.
   */
  request<P, R>(type: WireRequest<P, R>, params: P, options: RequestOptions = {}): Promise<R> {
    const gone = this.gone;
    if (gone) return Promise.reject(gone);
    const invalid = type.checkParams(params);
    if (invalid) return Promise.reject(invalidParams(type.method, invalid));
    return new Promise<R>((resolve, reject) => {
      const direct = DIRECT.has(type.method);
      // A source of our own only where the library's request must be cancelled by the timeout too;
      // else the caller's token (or none). A direct request is cancelled by its own handle.
      const source = options.timeoutMs === undefined || direct ? undefined : new CancellationTokenSource();
      const link = source && options.token?.onCancellationRequested(() => source.cancel());
      let timer: NodeJS.Timeout | undefined;
      let cancelDirect: (() => void) | undefined;
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        this.pending.delete(fail);
        clearTimeout(timer);
        link?.dispose();
        return true;
      };
      const fail = (error: unknown): void => {
        if (settle()) reject(error);
      };
      this.pending.add(fail);
      if (options.timeoutMs !== undefined) {
        const ms = options.timeoutMs;
        timer = setTimeout(() => {
          source?.cancel();
          cancelDirect?.();
          fail(
            new SubagentError(
              'DAEMON_UNRESPONSIVE',
              `${this.describe()} did not answer ${type.method} within ${ms} ms; it may be hung (check \`subagentd status\`)`,
            ),
          );
        }, ms);
      }
      const lost = (): SubagentError => this.gone ?? this.unavailable('connection disposed');
      // The library's overloads do not resolve for a generic P and R: send the declaration as
      // taking and answering `unknown` (an upcast; the answer is checked below).
      const declared: RequestType<unknown, unknown, SubagentErrorData> = type;
      let sent: Promise<unknown>;
      try {
        if (direct) {
          const call = this.direct.send(type.method, params, options.token);
          cancelDirect = call.cancel;
          sent = call.answer;
        } else sent = this.connection.sendRequest(declared, params, source?.token ?? options.token);
      } catch (error) {
        fail(fromWire(error, lost));
        return;
      }
      sent.then(
        (value) => {
          if (settled) return;
          const answer = type.readResult(value);
          if (!answer.ok) fail(invalidFromDaemon(`answer to ${type.method}`, answer.failure));
          else if (settle()) resolve(answer.value);
        },
        (error: unknown) => fail(fromWire(error, lost)),
      );
    });
  }

  /**
   * A validated notification handler: an invalid payload is logged and dropped, unless
   * `onInvalid` is given, for notifications that must never be lost (a run's end).
   */
  onNotification<P>(type: WireNotification<P>, handler: (params: P) => void, onInvalid?: (params: unknown, failure: ValidationFailure) => void): void {
    const handle = (params: unknown): void => {
      const checked = type.readParams(params);
      if (!checked.ok) {
        this.logger.error(`${onInvalid ? 'refused' : 'dropped'} an invalid ${type.method} notification from ${this.describe()}: ${checked.failure.message}`);
        onInvalid?.(params, checked.failure);
        return;
      }
      try {
        handler(checked.value);
      } catch (error) {
        this.logger.error(`handling ${type.method} failed`, error);
      }
    };
    if (PROMPT.has(type.method)) this.prompt.set(type.method, handle);
    this.connection.onNotification(type.method, handle);
  }

  /** A notification of PROMPT, handled here in its turn (InboundOrder calls it). */
  private handlePrompt(message: Message): boolean {
    const handle = this.prompt.get((message as NotificationMessage).method);
    if (!handle || this.lostError) return false;
    handle((message as NotificationMessage).params);
    this.checkDrained();
    return true;
  }

  /**
   * A handler for a daemon → client request: invalid params get INVALID_REQUEST naming the field;
   * a result that fails the declaration is this client's bug, answered as an internal error.
   */
  onRequest<P, R>(type: WireRequest<P, R>, handler: (params: P, token: CancellationToken) => Promise<R> | R): void {
    const serve = async (params: unknown, token: CancellationToken): Promise<unknown> => {
      const checked = type.readParams(params);
      if (!checked.ok) {
        throw new ResponseError<SubagentErrorData>(ErrorCodes.InvalidParams, `invalid ${type.method} params: ${checked.failure.message}`, {
          code: 'INVALID_REQUEST',
          field: checked.failure.field,
        });
      }
      let result: R;
      try {
        result = await handler(checked.value, token);
      } catch (error) {
        throw error instanceof SubagentError ? toWire(error) : error;
      }
      const wrong = type.checkResult(result);
      if (wrong) throw new ResponseError(ErrorCodes.InternalError, `this client produced an invalid ${type.method} result: ${wrong.message}`);
      return result;
    };
    // The library's HandlerResult is conditional on R and does not resolve for a generic R: the
    // declaration is registered as answering `unknown` (an upcast).
    const declared: RequestType<unknown, unknown, SubagentErrorData> = type;
    this.connection.onRequest(declared, serve);
  }

  /** Close from this side: everything pending rejects, then the transport is released. */
  async close(): Promise<void> {
    this.lose('closed by this client');
    await this.transport.close();
  }

  private beginLoss(reason: string): void {
    if (this.lostError || this.goneReason !== undefined) return;
    this.goneReason = reason;
    this.drainTimer = setTimeout(() => this.lose(reason), DRAIN_CAP_MS);
    this.checkDrained();
  }

  private checkDrained(): void {
    const reason = this.goneReason;
    if (reason === undefined || this.lostError || (this.inbound?.waiting ?? 0) > 0) return;
    // One more turn, so that continuations of the last answer (e.g. registering a run) run first.
    setImmediate(() => this.lose(reason));
  }

  private lose(reason: string): void {
    if (this.lostError) return;
    clearTimeout(this.drainTimer);
    this.goneReason ??= reason;
    const error = this.unavailable(this.goneReason);
    this.lostError = error;
    this.connection.dispose();
    // Each `fail` removes itself from the set; deleting the visited entry is safe mid-iteration.
    for (const fail of this.pending) fail(error);
    for (const listener of this.lostListeners.splice(0)) {
      try {
        listener(error);
      } catch (failure) {
        this.logger.error('a connection-loss handler threw', failure);
      }
    }
    void this.transport.close();
  }

  private unavailable(reason: string): SubagentError {
    const closing = this.closingReason;
    if (closing !== undefined) {
      return new SubagentError('DAEMON_UNAVAILABLE', `${this.describe()} closed the connection: ${closing}`, { reason: closing });
    }
    const hint = reason === 'closed by this client' ? '' : '; check `subagentd status`, or run `subagentd start`';
    return new SubagentError('DAEMON_UNAVAILABLE', `the connection to ${this.describe()} is gone (${reason})${hint}`);
  }
}

/**
 * Passes decoded inbound messages to the library in their order (`ordered` makes the InboundOrder
 * that does, around the library's callback), and takes the daemon's farewell out of the stream:
 * the library would only log an id-null error.
 */
function watchInbound(inner: MessageReader, ordered: (pass: DataCallback) => InboundOrder, onFarewell: (reason: string) => void): MessageReader {
  return {
    onError: inner.onError,
    onClose: inner.onClose,
    onPartialMessage: inner.onPartialMessage,
    listen: (callback) => {
      const order = ordered(callback);
      return inner.listen((message) => {
        const reason = farewellReason(message);
        if (reason !== undefined) return onFarewell(reason);
        order.arrive(message);
      });
    },
    dispose: () => inner.dispose(),
  };
}

function libraryLogger(logger: ClientLogger): Logger {
  return {
    error: (message) => logger.error(`vscode-jsonrpc: ${message}`),
    warn: (message) => logger.warn?.(`vscode-jsonrpc: ${message}`),
    info: () => undefined,
    log: () => undefined,
  };
}

/** The reason in a daemon's "closing: …" error (id null, no method), else undefined. */
function farewellReason(message: unknown): string | undefined {
  const m = message as { id?: unknown; method?: unknown; error?: { message?: unknown } };
  if (m.id !== null || m.method !== undefined || typeof m.error?.message !== 'string') return undefined;
  const text = m.error.message;
  return text.startsWith(CLOSING_MESSAGE_PREFIX) ? text.slice(CLOSING_MESSAGE_PREFIX.length).slice(0, 1024) : undefined;
}
