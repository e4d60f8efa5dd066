/**
 * The daemon's messages, dispatched in the order they were read, while answers skip the
 * library's queue.
 *
 * vscode-jsonrpc dispatches requests and notifications from a queue, one per event-loop turn.
 * Answers go through that queue too, unless the connection has a `maxParallelism`: then the
 * library resolves each answer as it is read, a turn earlier (the client's start → ready). Taken
 * alone that would let an answer overtake notifications read before it: the reply to
 * `run/dispose` resolving before that run's `subagent/end` was handled. So:
 *
 *   an answer is passed on at once only while none of the messages read before it waits in the
 *   library's queue; otherwise it is held, and so is everything read after it, until they have
 *   been dispatched. Requests and notifications are passed on in order (the library queues them).
 *
 * A run's end and its events (what a waiting caller waits for) skip the library's queue too, when
 * nothing read before them waits there: the channel handles them itself (`own`) at the turn's
 * check phase, all of a turn's at once, where the library would take one per turn. Not earlier:
 * an answer read with them (a start's reply and that run's end, in one chunk) has its caller
 * continue first. Answers read after them wait for them, as for the library's queue.
 *
 * `dispatched` must hear each message the library takes from its queue (the connection's
 * messageStrategy); `waiting` counts what is queued or held, so a closing connection can let the
 * last messages through before it rejects what is pending.
 */
import { Message } from 'vscode-jsonrpc/node';

/** The notifications the channel handles itself (see the header). */
export interface OwnDispatch {
  takes(message: Message): boolean;
  /** Handles it; false when it cannot (the connection is gone), and the library gets it. */
  handle(message: Message): boolean;
}

const NONE: OwnDispatch = { takes: () => false, handle: () => false };

export class InboundOrder {
  /** Messages handed to the library's queue and not yet dispatched from it. */
  private readonly queued = new WeakSet<Message>();
  private queuedCount = 0;
  /** Read but not passed on yet: an answer that must wait, and what came after it. */
  private held: Message[] = [];
  /** Notifications the channel handles itself at this turn's check phase, in order. */
  private own: Message[] = [];

  constructor(
    private readonly pass: (message: Message) => void,
    private readonly dispatch: OwnDispatch = NONE,
  ) {}

  get waiting(): number {
    return this.queuedCount + this.own.length + this.held.length;
  }

  /** A message read from the transport. */
  arrive(message: Message): void {
    if (this.held.length > 0 || (this.ahead() && Message.isResponse(message))) this.held.push(message);
    else this.hand(message);
  }

  /** The library took `message` from its queue to dispatch it. */
  dispatched(message: Message): void {
    if (!this.queued.delete(message)) return;
    this.queuedCount -= 1;
    this.release();
  }

  /** Whether a message read earlier still waits to be dispatched. */
  private ahead(): boolean {
    return this.queuedCount > 0 || this.own.length > 0;
  }

  private release(): void {
    while (this.held.length > 0) {
      if (this.ahead() && Message.isResponse(this.held[0])) return;
      this.hand(this.held.shift()!);
    }
  }

  private handleOwn(): void {
    while (this.own.length > 0) {
      const message = this.own.shift()!;
      if (!this.dispatch.handle(message)) this.pass(message);
    }
    this.release();
  }

  private hand(message: Message): void {
    if (this.queuedCount === 0 && Message.isNotification(message) && this.dispatch.takes(message)) {
      if (this.own.push(message) === 1) setImmediate(() => this.handleOwn());
      return;
    }
    // A `$/cancelRequest` is acted on when read, or queued only to be dropped: never waited for.
    if (!Message.isResponse(message) && (message as { method?: unknown }).method !== '$/cancelRequest') {
      this.queued.add(message);
      this.queuedCount += 1;
    }
    this.pass(message);
  }
}
