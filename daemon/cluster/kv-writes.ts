/**
 * Compare-and-set writes to a JetStream KV bucket, published straight to the key's subject
 * (`$KV.<bucket>.<key>`) with the expected-last-subject-sequence header, their acknowledgements
 * taken on one reply subscription this member holds for all of them.
 *
 * Why not the KV client's `create`/`update`: each of those is a request of its own (a request
 * object, a promise, a timer, and an error built with its stack when the request is tidied away
 * after its answer), and a pooled run makes three or four of them. Measured with 32 writers on
 * one connection: about 30–45 µs of CPU per write through the KV client, 13–15 µs here.
 *
 * Rules and failures:
 * - A write lands only if the key's last revision is `expected` (0: the key has none); a stale
 *   one is refused by the server with JetStream's "wrong last sequence" (error code 10071), which
 *   the rejection carries as `code`, as the KV client's does.
 * - No stream behind the subject (the bucket is gone): rejected at once ("no responders").
 * - No acknowledgement within `timeoutMs` (the server is away; a write made meanwhile is sent
 *   once the connection is back, and may still land): rejected with a timeout, as the KV
 *   client's would be. One sweep timer serves every pending write.
 * - The writes asked for in one turn of the event loop are published together at its end, so
 *   that they leave in one socket write (the client flushes after each microtask checkpoint,
 *   which on a busy member meant a write per record change). A value given as a function is
 *   made then, so it holds what that turn learned (answer-writes.ts).
 */
import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** The header JetStream checks a write against: the subject's last sequence (its key's revision). */
const EXPECTED_LAST_SUBJECT_SEQUENCE = 'Nats-Expected-Last-Subject-Sequence';
const SWEEP_MS = 250;

interface Pending {
  readonly resolve: (revision: number) => void;
  readonly reject: (error: Error) => void;
  readonly deadline: number;
}

/** A refused write: `code` is JetStream's error code (10071: wrong last sequence). */
export class KvWriteError extends Error {
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
    this.name = 'KvWriteError';
  }
}

export class KvWrites {
  private readonly inbox = createInbox();
  private readonly pending = new Map<string, Pending>();
  private readonly subscription: Subscription;
  private sweeper: NodeJS.Timeout | undefined;
  private next = 0;
  /** Writes waiting for the end of this turn, published together. */
  private batch: Array<{ readonly id: string; readonly subject: string; readonly value: string | (() => string); readonly expected: number }> = [];

  constructor(
    private readonly nc: NatsConnection,
    private readonly bucket: string,
    private readonly timeoutMs = 5000,
  ) {
    this.subscription = nc.subscribe(`${this.inbox}.*`, {
      callback: (error, msg) => {
        if (error === null) this.answer(msg);
      },
    });
  }

  /**
   * Writes `value` at `key` if its last revision is `expected` (0: no revision yet); resolves with
   * the new revision. A function is called for the value when the write leaves, at the turn's end.
   */
  write(key: string, value: string | (() => string), expected: number): Promise<number> {
    const id = String(++this.next);
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, deadline: performance.now() + this.timeoutMs });
      if (this.batch.length === 0) setImmediate(() => this.publish());
      this.batch.push({ id, subject: `$KV.${this.bucket}.${key}`, value, expected });
      this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
    });
  }

  private publish(): void {
    const batch = this.batch;
    this.batch = [];
    for (const { id, subject, value, expected } of batch) {
      const waiting = this.pending.get(id);
      if (!waiting) continue; // closed meanwhile
      const h = headers();
      h.set(EXPECTED_LAST_SUBJECT_SEQUENCE, String(expected));
      try {
        this.nc.publish(subject, typeof value === 'string' ? value : value(), { reply: `${this.inbox}.${id}`, headers: h });
      } catch (error) {
        this.pending.delete(id);
        waiting.reject(error instanceof Error ? error : new Error(String(error)));
      }
    }
  }

  /** Stops taking acknowledgements; writes still pending are rejected. */
  close(): void {
    this.subscription.unsubscribe();
    for (const [id, waiting] of this.pending) {
      this.pending.delete(id);
      waiting.reject(new KvWriteError(`the connection to the ${this.bucket} bucket was closed before the write was acknowledged`));
    }
    this.stopSweeping();
  }

  private answer(msg: Msg): void {
    const id = msg.subject.slice(this.inbox.length + 1);
    const waiting = this.pending.get(id);
    if (!waiting) return; // timed out already
    this.pending.delete(id);
    if (this.pending.size === 0) this.stopSweeping();
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      waiting.reject(new KvWriteError(`no responders: the ${this.bucket} bucket's stream is not there`));
      return;
    }
    let ack: { seq?: unknown; error?: { err_code?: unknown; description?: unknown } };
    try {
      ack = msg.json();
    } catch {
      waiting.reject(new KvWriteError(`the ${this.bucket} bucket answered a write with something other than an acknowledgement`));
      return;
    }
    if (ack.error) {
      const code = typeof ack.error.err_code === 'number' ? ack.error.err_code : undefined;
      waiting.reject(new KvWriteError(typeof ack.error.description === 'string' ? ack.error.description : 'the write was refused', code));
    } else if (typeof ack.seq === 'number') waiting.resolve(ack.seq);
    else waiting.reject(new KvWriteError(`the ${this.bucket} bucket acknowledged a write without its sequence`));
  }

  private sweep(): void {
    const now = performance.now();
    for (const [id, waiting] of this.pending) {
      if (waiting.deadline > now) continue;
      this.pending.delete(id);
      waiting.reject(new KvWriteError(`timeout: the ${this.bucket} bucket did not acknowledge a write within ${this.timeoutMs} ms`));
    }
    if (this.pending.size === 0) this.stopSweeping();
  }

  private stopSweeping(): void {
    if (this.sweeper === undefined) return;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
