/**
 * The requests every run makes (its start and its dispose) sent and answered without
 * vscode-jsonrpc's request machinery: the frame goes to the same writer (so it keeps its place
 * among the library's writes), and its answer is taken from the inbound stream before the
 * library would look for it. The daemon serves the same two methods as they are read
 * (daemon/connection/direct-lane.ts); together they take the library's queue, promise chain and
 * per-request bookkeeping off a run's round trips (measured: BENCHMARKS.md, wire section).
 *
 * Rules:
 * - Ids are strings (`d1`, `d2`, …): the library numbers its own requests, so the two never meet.
 * - An answer is taken here in its turn: the connection's InboundOrder passes it on only after
 *   every message read before it was dispatched, exactly as for the library's answers.
 * - Cancelling the token sends `$/cancelRequest` for the id; the daemon's answer still settles it.
 * - An error answer rejects with the library's ResponseError (code, message, data), so callers
 *   map it as they map the library's; a lost connection is the caller's to reject (RpcChannel),
 *   as a request the daemon never answers is (its entry goes with the connection, as in the library).
 */
import { ResponseError, type CancellationToken, type Message, type MessageWriter } from 'vscode-jsonrpc/node';

interface Waiting {
  readonly resolve: (result: unknown) => void;
  readonly reject: (error: unknown) => void;
}

export class DirectRequests {
  private next = 0;
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly writer: MessageWriter) {}

  /** Sends the request; `cancel` (or the token) asks the daemon to cancel it, once, while unanswered. */
  send(method: string, params: unknown, token: CancellationToken | undefined): { readonly answer: Promise<unknown>; cancel(): void } {
    const id = `d${++this.next}`;
    let cancelled = false;
    const cancel = (): void => {
      if (cancelled || !this.waiting.has(id)) return;
      cancelled = true;
      void this.writer.write({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } } as Message);
    };
    const answer = new Promise<unknown>((resolve, reject) => {
      const listening = token?.onCancellationRequested(cancel);
      this.waiting.set(id, {
        resolve: (result) => {
          listening?.dispose();
          resolve(result);
        },
        reject: (error) => {
          listening?.dispose();
          reject(error);
        },
      });
      this.writer.write({ jsonrpc: '2.0', id, method, params } as Message).catch((error: unknown) => this.settle(id)?.reject(error));
    });
    return { answer, cancel };
  }

  /** An inbound message: true when it answered a request of ours (settled here). */
  take(message: Message): boolean {
    const m = message as { id?: unknown; method?: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };
    if (typeof m.id !== 'string' || m.method !== undefined) return false;
    const waiting = this.settle(m.id);
    if (!waiting) return false;
    if (m.error) waiting.reject(new ResponseError(m.error.code, m.error.message, m.error.data));
    else waiting.resolve(m.result);
    return true;
  }

  private settle(id: string): Waiting | undefined {
    const waiting = this.waiting.get(id);
    this.waiting.delete(id);
    return waiting;
  }
}
