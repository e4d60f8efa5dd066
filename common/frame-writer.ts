/**
 * JSON-RPC framing on the way out, one home for both ends of the wire. Each message is one
 * `Content-Length` frame built as one string, and the frames of one batch leave in a single
 * stream write. vscode-jsonrpc's own writer writes the header and the body apart, each awaited
 * under a lock, so its messages never share a syscall.
 *
 * A batch is a tick (`'tick'`: the client, whose requests should leave at once: the first frame
 * of a tick is written when it is queued, and the frames queued after it in the same tick, a
 * burst of starts, share one write when the nextTick queue runs) or an event-loop turn (`'turn'`,
 * until the next check phase: the daemon, whose notifications of one turn then share a write). A subclass may cut a batch short with
 * `flushNow` (the daemon does for its replies: a client waits on each, and the next check phase
 * is a whole loop iteration away).
 *
 * `beforeWrite`, when given, runs right before each batch goes to the stream (not when the batch is
 * empty or the stream closed): the daemon writes its pending run records there, so that a client
 * never hears of a record a crash could still lose (write-ahead; daemon/store/run-index.ts). It
 * must not throw.
 *
 * While the stream is backed up (the peer is not taking what was written), frames wait in the
 * batch until it drains rather than in the stream's buffer; a deferred frame (protocol/framing.ts)
 * is built only then. So a peer that never reads costs what it was sent as the messages, not as
 * their JSON, and the frames still go out in the order they were queued.
 *
 * A write never rejects: a failed write (EPIPE on a peer that hung up, a destroyed stream) is
 * reported on `onError` and its promise resolves. vscode-jsonrpc drops some write promises on the
 * floor (its replies), and the reader side learns of a dead peer anyway.
 */
import type { Writable } from 'node:stream';
import type { Event, Message, MessageWriter } from 'vscode-jsonrpc/node';
import { jsonrpc } from '../protocol/jsonrpc-runtime.js';
import { frameOf, type DeferredFrame, type Frame } from '../protocol/framing.js';


type Done = (error?: Error | null) => void;

/** How long frames are gathered before they are written together (see the header). */
export type BatchSpan = 'tick' | 'turn';

/** A frame's text, or what builds it when it is written (a deferred frame: protocol/framing.ts). */
type Part = string | (() => string);

/**
 * Frames joined until the end of the tick or turn, then written as one chunk; each hears its
 * outcome. While the stream is backed up (its buffer past its high-water mark: the peer is not
 * taking what was written), frames wait here until it drains instead of piling up in the
 * stream's buffer: a deferred frame is built only then, so a peer that does not read never costs
 * a serialised copy of it.
 */
class FrameBatch {
  private parts: Part[] = [];
  private waiting: Done[] = [];
  private scheduled = false;
  /** Waiting for the stream's 'drain' (or 'close'). */
  private held = false;
  /** Deferred frames among `parts`. */
  private deferred = 0;

  constructor(
    private readonly output: Writable,
    private readonly span: BatchSpan,
    private readonly beforeWrite: (() => void) | undefined,
  ) {
    // A stream that closes while frames wait for its drain: they hear the failure (see write).
    output.once('close', () => this.release());
  }

  /** True while written frames wait for the peer: a frame queued now is not written before it reads. */
  get backedUp(): boolean {
    return this.held || this.output.writableNeedDrain;
  }

  add(frame: Part, done: Done): void {
    this.parts.push(frame);
    if (typeof frame !== 'string') this.deferred += 1;
    this.waiting.push(done);
    if (this.scheduled || this.held) return;
    this.scheduled = true;
    if (this.span === 'turn') {
      setImmediate(() => this.flush());
      return;
    }
    // The tick's first frame goes now; the tick stays open for the frames that follow it.
    this.write();
    process.nextTick(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    this.write();
  }

  /** Writes what waits even onto a backed-up stream (before the stream is ended). */
  flushAll(): void {
    this.scheduled = false;
    this.write(true);
  }

  private release(): void {
    if (!this.held) return;
    this.held = false;
    this.write();
  }

  private write(evenIfBackedUp = false): void {
    const waiting = this.waiting;
    if (waiting.length === 0 || (this.held && !evenIfBackedUp)) return;
    const settle = (error?: Error | null): void => {
      for (const done of waiting) done(error);
    };
    if (this.output.destroyed || this.output.writableEnded) {
      this.parts = [];
      this.deferred = 0;
      this.waiting = [];
      return settle(new Error('the connection is closed'));
    }
    if (!evenIfBackedUp && this.output.writableNeedDrain) {
      this.held = true;
      this.output.once('drain', () => this.release());
      return;
    }
    const parts = this.parts;
    this.parts = [];
    this.waiting = [];
    const only = parts.length === 1 ? parts[0] : undefined;
    const text =
      typeof only === 'string' ? only : this.deferred === 0 ? parts.join('') : parts.map((part) => (typeof part === 'string' ? part : part())).join('');
    this.deferred = 0;
    this.beforeWrite?.();
    this.output.write(text, 'utf8', settle);
  }
}

export class FrameWriter implements MessageWriter {
  private readonly batch: FrameBatch;
  private errors = 0;
  private readonly errorEmitter = new jsonrpc.Emitter<[Error, Message | undefined, number | undefined]>();
  private readonly closeEmitter = new jsonrpc.Emitter<void>();

  constructor(
    private readonly output: Writable,
    span: BatchSpan = 'tick',
    /** Runs before each batch is written (see the header). */
    beforeWrite?: () => void,
  ) {
    this.batch = new FrameBatch(output, span, beforeWrite);
    output.on('close', () => this.closeEmitter.fire());
    // A stream without an 'error' listener throws its error (stdout's EPIPE) as an uncaught exception.
    output.on('error', (error: Error) => this.errorEmitter.fire([error, undefined, ++this.errors]));
  }

  get onError(): Event<[Error, Message | undefined, number | undefined]> {
    return this.errorEmitter.event;
  }

  get onClose(): Event<void> {
    return this.closeEmitter.event;
  }

  write(message: Message): Promise<void> {
    return new Promise<void>((resolve) => this.send(message, frameOf(message), () => resolve()));
  }

  /** Queues one frame; `done` runs once the stream took its batch's chunk, or failed to. */
  protected send(message: Message, frame: Frame | DeferredFrame, done: (error?: Error | null) => void): void {
    this.batch.add('text' in frame ? frame.text : frame.build, (error) => {
      if (error) this.errorEmitter.fire([error, message, ++this.errors]);
      done(error);
    });
  }

  /** Writes what the batch holds now, with the frames queued before it, in order. */
  protected flushNow(): void {
    this.batch.flush();
  }

  /** True while what was written waits for the peer to read (see FrameBatch). */
  get backedUp(): boolean {
    return this.batch.backedUp;
  }

  /** Writes what the batch holds, then ends the stream. */
  end(): void {
    this.batch.flushAll();
    this.output.end();
  }

  dispose(): void {
    this.errorEmitter.dispose();
    this.closeEmitter.dispose();
  }
}
