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
 * A notification that `takeNow` handles itself (a run's end and its events: what a waiting caller
 * waits for) is handled as it is read under the same rule, without the library's queue and its
 * turn: only while nothing read before it waits there.
 *
 * `dispatched` must hear each message the library takes from its queue (the connection's
 * messageStrategy); `waiting` counts what is queued or held, so a closing connection can let the
 * last messages through before it rejects what is pending.
 */
import { Message } from 'vscode-jsonrpc/node';

export class InboundOrder {
  /** Messages handed to the library's queue and not yet dispatched from it. */
  private readonly queued = new WeakSet<Message>();
  private queuedCount = 0;
  /** Read but not passed on yet: an answer that must wait, and what came after it. */
  private held: Message[] = [];

  constructor(
    private readonly pass: (message: Message) => void,
    /** Handles a notification itself and says so, or leaves it to the library (false). */
    private readonly takeNow: (message: Message) => boolean = () => false,
  ) {}

  get waiting(): number {
    return this.queuedCount + this.held.length;
  }

  /** A message read from the transport. */
  arrive(message: Message): void {
    if (this.held.length > 0 || (this.queuedCount > 0 && Message.isResponse(message))) this.held.push(message);
    else this.hand(message);
  }

  /** The library took `message` from its queue to dispatch it. */
  dispatched(message: Message): void {
    if (!this.queued.delete(message)) return;
    this.queuedCount -= 1;
    while (this.held.length > 0) {
      if (this.queuedCount > 0 && Message.isResponse(this.held[0])) return;
      this.hand(this.held.shift()!);
    }
  }

  private hand(message: Message): void {
    if (this.queuedCount === 0 && Message.isNotification(message) && this.takeNow(message)) return;
    // A `$/cancelRequest` is acted on when read, or queued only to be dropped: never waited for.
    if (!Message.isResponse(message) && (message as { method?: unknown }).method !== '$/cancelRequest') {
      this.queued.add(message);
      this.queuedCount += 1;
    }
    this.pass(message);
  }
}
