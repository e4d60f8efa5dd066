/**
 * The daemon's MessageWriter: the shared frame writer (common/frame-writer.ts: one string per
 * message, an event-loop turn's notifications in one write), plus a count of what it has not yet
 * handed to the socket. That count is the daemon's measure of a client that reads slowly or not
 * at all: a frame counts from `write` until the stream took its batch's chunk.
 *
 * A reply, or a run's end (`subagent/end`), is written at once, with whatever was queued before
 * it, when `hooks.atOnce` says so (the daemon: when the client has no other request open): a
 * client is waiting on it, and the turn's batch would hold it for a loop iteration plus whatever
 * else the turn does (a trivial run's whole settle, for a start; the child's last clean-up, for an
 * end). What is queued after it goes in the turn's write. A client with several requests open is
 * busy anyway: its replies and ends share the turn's write, one syscall (and one index write) for
 * many.
 *
 * `hooks.queued` hears each message once it has its place in the outgoing order (before it is
 * written): what is queued after it reaches the peer after it. `hooks.beforeWrite` is the frame
 * writer's (it runs before each batch is written). `hooks.beforeMessage` runs before each message
 * takes its place: a connection that batches run events (event-batch.ts) queues the batch waiting
 * there, so it keeps its place in the order. `writeJson` queues a message whose JSON the caller
 * built (that batch), counted like any other; `writeFrame` one it builds when the peer reads.
 *
 * While the peer is not taking what was written (the frame writer holds frames until it drains),
 * a run's end is queued as the message, its JSON built when the peer reads: its output (up to
 * `limits.maxOutputBytes`) is the run's result, which the daemon keeps anyway, where its JSON
 * would be a second copy for as long as the peer does not read. It counts its exact bytes all
 * the same (protocol/json-bytes.ts).
 *
 * Like the frame writer, a write never rejects: failures are reported on `onError`.
 */
import type { Writable } from 'node:stream';
import type { Message, NotificationMessage } from 'vscode-jsonrpc/node';
import { deferredFrameOf, EndNotification, frameOf, frameOfJson, RunEventsNotification, type DeferredFrame, type Frame } from '../../protocol/index.js';
import { within } from '../../common/bounded-wait.js';
import { FrameWriter } from '../../common/frame-writer.js';

export interface WriterHooks {
  readonly beforeWrite?: () => void;
  readonly queued?: (message: Message) => void;
  /** Runs before each message is queued (not before `writeJson`'s own). */
  readonly beforeMessage?: () => void;
  /** Whether a reply or a run's end goes out at once (see the header); without it, always. */
  readonly atOnce?: () => boolean;
  /** Hears each reply or run's end queued: what a client waits on, and is likely to answer. */
  readonly waitedOn?: () => void;
}

/** What the error listener hears of a failed `writeJson` (its JSON is not kept as a message). */
const BATCH: NotificationMessage = { jsonrpc: '2.0', method: RunEventsNotification.method };

export class CountingWriter extends FrameWriter {
  private inFlight = 0;
  private inFlightBytes = 0;
  private refused = false;
  private idle: Array<() => void> = [];

  /**
   * `onChange` hears every change of the count; `written` is the message just handed over.
   * `bound.maxUnsentBytes` caps the bytes not yet taken by the socket: a frame that would go past
   * it while something is still unsent is not written, and `bound.onOverLimit` hears it once (the
   * owner closes the connection). A single frame bigger than the bound still goes to a peer
   * that has taken everything else.
   */
  constructor(
    output: Writable,
    private readonly onChange: (written?: Message) => void = () => undefined,
    private readonly bound: { readonly maxUnsentBytes: number; readonly onOverLimit: (unsentBytes: number) => void } = {
      maxUnsentBytes: Number.POSITIVE_INFINITY,
      onOverLimit: () => undefined,
    },
    private readonly hooks: WriterHooks = {},
  ) {
    super(output, 'turn', hooks.beforeWrite);
  }

  get unsent(): number {
    return this.inFlight;
  }

  get unsentBytes(): number {
    return this.inFlightBytes;
  }

  /** True once a frame was refused for the byte bound: nothing more is written. */
  get overLimit(): boolean {
    return this.refused;
  }

  override write(message: Message): Promise<void> {
    this.hooks.beforeMessage?.();
    // A run's end to a peer that is not reading is kept as the message, not its JSON: its output
    // is the run's own result, held anyway; the frame is built when the peer reads (see the header).
    const frame = this.backedUp && isEnd(message) ? deferredFrameOf(message) : frameOf(message);
    if (this.refuses(frame)) return Promise.resolve();
    const sent = this.enqueue(frame, message);
    this.hooks.queued?.(message);
    if (waitedOn(message)) {
      this.hooks.waitedOn?.();
      if (this.hooks.atOnce?.() ?? true) this.flushNow();
    }
    return sent;
  }

  /** A message whose JSON the caller built (a `run/events` batch), counted like any other. */
  writeJson(json: string): Promise<void> {
    return this.writeFrame(frameOfJson(json));
  }

  /** A message whose JSON the caller builds once the peer reads (a held `run/events` batch). */
  writeFrame(frame: Frame | DeferredFrame): Promise<void> {
    return this.refuses(frame) ? Promise.resolve() : this.enqueue(frame, undefined);
  }

  /** True when nothing more may be written: refused before, or `frame` would cross the byte bound now. */
  private refuses(frame: Frame | DeferredFrame): boolean {
    if (this.refused) return true;
    if (this.inFlightBytes > 0 && this.inFlightBytes + frame.bytes > this.bound.maxUnsentBytes) {
      this.refused = true;
      this.bound.onOverLimit(this.inFlightBytes);
      return true;
    }
    return false;
  }

  /** `message` is handed to `onChange` once written (undefined for `writeJson`'s). */
  private enqueue(frame: Frame | DeferredFrame, message: Message | undefined): Promise<void> {
    // Only the size is kept for the write's callback: the frame's text is the socket's once written.
    const bytes = frame.bytes;
    this.inFlight += 1;
    this.inFlightBytes += bytes;
    this.onChange();
    return new Promise<void>((resolve) => {
      this.send(message ?? BATCH, frame, () => {
        this.inFlight -= 1;
        this.inFlightBytes -= bytes;
        this.onChange(message);
        if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
        resolve();
      });
    });
  }

  /** Resolves once nothing is unsent, or after `timeoutMs` (a peer that never reads). */
  drained(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return within(new Promise<void>((resolve) => this.idle.push(resolve)), timeoutMs).then(() => undefined);
  }
}

/** A reply (an id and no method), or a run's end: what a client that waits is waiting for. */
function waitedOn(message: Message): boolean {
  if (!('method' in message)) return 'id' in message;
  return isEnd(message);
}

/** A `subagent/end`: built fresh for each run's end and never changed after (a deferred frame's rule). */
function isEnd(message: Message): boolean {
  return (message as NotificationMessage).method === EndNotification.method;
}
