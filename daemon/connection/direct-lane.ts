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
 *   never saw that request); any other goes to the library.
 * - Failures: `serve` answers errors as a ResponseError (it never rejects); a reply is written
 *   even if the connection is closing (the writer drops it if the stream is gone).
 */
import type { Message } from 'vscode-jsonrpc/node';
import { jsonrpc } from '../../protocol/jsonrpc-runtime.js';

/** Serves one request's params, aborted on its cancel; resolves to its result or to the ResponseError to answer. */
export type Serve = (params: unknown, cancel: AbortSignal) => Promise<unknown>;

type Id = string | number;

export class DirectLane {
  private readonly served = new Map<string, Serve>();
  /** Requests being served here, by id: what a `$/cancelRequest` for them aborts. */
  private readonly running = new Map<Id, AbortController>();
  /** Messages handed to the library's queue and not yet dispatched from it. */
  private readonly queued = new WeakSet<Message>();
  private queuedCount = 0;

  constructor(private readonly reply: (message: object) => void) {}

  /** Serve `method` here (its handler is also registered with the library, which serves it when the lane can't). */
  add(method: string, serve: Serve): void {
    this.served.set(method, serve);
  }

  /** A message read from the client: true when it was taken here, false when it goes to the library. */
  take(message: Message): boolean {
    const m = message as { method?: string; id?: Id; params?: { id?: Id } };
    if (m.method === '$/cancelRequest') {
      const running = m.params?.id === undefined ? undefined : this.running.get(m.params.id);
      running?.abort();
      return running !== undefined;
    }
    const serve = m.method === undefined ? undefined : this.served.get(m.method);
    if (serve === undefined || m.id === undefined || this.queuedCount > 0) {
      this.queued.add(message);
      this.queuedCount += 1;
      return false;
    }
    const id = m.id;
    const cancel = new AbortController();
    this.running.set(id, cancel);
    void serve(m.params, cancel.signal).then((answer) => {
      if (this.running.get(id) === cancel) this.running.delete(id);
      this.reply(answer instanceof jsonrpc.ResponseError ? { jsonrpc: '2.0', id, error: answer.toJson() } : { jsonrpc: '2.0', id, result: answer ?? null });
    });
    return true;
  }

  /** The library took `message` from its queue to dispatch it. */
  dispatched(message: Message): void {
    if (this.queued.delete(message)) this.queuedCount -= 1;
  }
}
