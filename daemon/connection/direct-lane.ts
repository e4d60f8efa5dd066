/**
 * The requests every run makes (its start and its dispose) served as soon as they are read,
 * instead of a loop turn later from vscode-jsonrpc's queue.
 *
 * Why: the library dispatches each request from a queue, one per event-loop turn, through its
 * own promise chain (handleRequest, reply, the queue's bookkeeping). For a start that is about
 * a tenth of the round trip a client waits for (measured: BENCHMARKS.md, wire section). The
 * library offers no option for it, so these few methods are dispatched here with the same
 * handler (`serve`: the connection's checks, validation and error mapping) and answered in the
 * library's reply shape through the same writer. Everything else goes through the library.
 *
 * Rules:
 * - Order: a request is taken here only while nothing read before it waits in the library's
 *   queue; otherwise it goes through the library like any other, so requests are still
 *   dispatched in the order they were read. `dispatched` must hear each message the library
 *   takes from its queue (the connection's messageStrategy).
 * - Cancellation: a `$/cancelRequest` naming a request served here aborts it here (the library
 *   never saw that request); any other goes to the library. A start is answered as soon as it is
 *   ready, without waiting a loop turn for a cancel that may follow it: a `$/cancelRequest` read
 *   after its answer is a late cancel, and a method added with `lateCancel` acts on it (a start
 *   cancels the run it answered, as `run/cancel` does). Late cancels are remembered for the last
 *   LATE_CANCEL_WINDOW such answers of the connection, and a request reusing an id forgets its.
 * - Failures: `serve` answers errors as a ResponseError (it never rejects); a reply is written
 *   even if the connection is closing (the writer drops it if the stream is gone).
 */
import type { Message } from 'vscode-jsonrpc/node';
import { jsonrpc } from '../../protocol/jsonrpc-runtime.js';

/** Serves one request's params, aborted on its cancel; resolves to its result or to the ResponseError to answer. */
export type Serve = (params: unknown, cancel: AbortSignal) => Promise<unknown>;
/** What a `$/cancelRequest` read after the answer does, given the result that was answered. */
export type LateCancel = (result: unknown) => void;

type Id = string | number;

/** Answers per connection whose late cancel is still acted on: a cancel sent with its request arrives within a few. */
export const LATE_CANCEL_WINDOW = 64;

export class DirectLane {
  private readonly served = new Map<string, { readonly serve: Serve; readonly lateCancel: LateCancel | undefined }>();
  /** Requests being served here, by id: what a `$/cancelRequest` for them aborts. */
  private readonly running = new Map<Id, AbortController>();
  /** Messages handed to the library's queue and not yet dispatched from it. */
  private readonly queued = new WeakSet<Message>();
  private queuedCount = 0;
  /** Answered requests whose late cancel is acted on, oldest first (at most LATE_CANCEL_WINDOW). */
  private readonly answered = new Map<Id, () => void>();

  constructor(private readonly reply: (message: object) => void) {}

  /**
   * Serve `method` here (its handler is also registered with the library, which serves it when
   * the lane can't); `lateCancel`, when given, hears a cancel that came after the answer.
   */
  add(method: string, serve: Serve, lateCancel?: LateCancel): void {
    this.served.set(method, { serve, lateCancel });
  }

  /** A message read from the client: true when it was taken here, false when it goes to the library. */
  take(message: Message): boolean {
    const m = message as { method?: string; id?: Id; params?: { id?: Id } };
    if (m.method === '$/cancelRequest') {
      const target = m.params?.id;
      if (target === undefined) return false;
      const running = this.running.get(target);
      if (running) {
        running.abort();
        return true;
      }
      const late = this.answered.get(target);
      if (!late) return false;
      this.answered.delete(target);
      late();
      return true;
    }
    // A request reusing an answered id: a cancel naming that id is now this request's.
    if (m.method !== undefined && m.id !== undefined && this.answered.size > 0) this.answered.delete(m.id);
    const served = m.method === undefined ? undefined : this.served.get(m.method);
    if (served === undefined || m.id === undefined || this.queuedCount > 0) {
      this.queued.add(message);
      this.queuedCount += 1;
      return false;
    }
    const id = m.id;
    const cancel = new AbortController();
    this.running.set(id, cancel);
    const { serve, lateCancel } = served;
    void serve(m.params, cancel.signal).then((answer) => {
      if (this.running.get(id) === cancel) this.running.delete(id);
      const failed = answer instanceof jsonrpc.ResponseError;
      if (lateCancel && !failed) this.rememberLateCancel(id, () => lateCancel(answer));
      this.reply(failed ? { jsonrpc: '2.0', id, error: answer.toJson() } : { jsonrpc: '2.0', id, result: answer ?? null });
    });
    return true;
  }

  private rememberLateCancel(id: Id, late: () => void): void {
    if (this.answered.size >= LATE_CANCEL_WINDOW) this.answered.delete(this.answered.keys().next().value!);
    this.answered.set(id, late);
  }

  /** The library took `message` from its queue to dispatch it. */
  dispatched(message: Message): void {
    if (this.queued.delete(message)) this.queuedCount -= 1;
  }
}
