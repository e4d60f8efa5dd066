/**
 * JSON-RPC framing on the way out, one home for both ends of the wire. Each message is one
 * `Content-Length` frame built as one string, and the frames written in one tick (until the
 * nextTick queue runs) leave in a single stream write: one write(2) per tick instead of two per
 * message. vscode-jsonrpc's own writer writes the header and the body apart, each awaited under
 * a lock, so its messages never share a syscall.
 *
 * A write never rejects: a failed write (EPIPE on a peer that hung up, a destroyed stream) is
 * reported on `onError` and its promise resolves. vscode-jsonrpc drops some write promises on the
 * floor (its replies), and the reader side learns of a dead peer anyway.
 */
import type { Writable } from 'node:stream';
import { Emitter, type Event, type Message, type MessageWriter } from 'vscode-jsonrpc/node';

/** One frame as text (header and JSON body) and its length in bytes on the wire. */
export interface Frame {
  readonly text: string;
  readonly bytes: number;
}

export function frameOf(message: object): Frame {
  const body = JSON.stringify(message);
  const length = Buffer.byteLength(body, 'utf8');
  const text = `Content-Length: ${length}\r\n\r\n${body}`;
  // The header is ASCII: its bytes are its characters.
  return { text, bytes: text.length - body.length + length };
}

/** One frame as a buffer, for a last write outside any writer (a farewell before `end`). */
export function encodeFrame(message: object): Buffer {
  return Buffer.from(frameOf(message).text, 'utf8');
}

type Done = (error?: Error | null) => void;

/** Frames joined until the end of the tick, then written as one chunk; each hears its outcome. */
class TickBatch {
  private text = '';
  private waiting: Done[] = [];
  private scheduled = false;

  constructor(private readonly output: Writable) {}

  add(frame: string, done: Done): void {
    this.text += frame;
    this.waiting.push(done);
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    const waiting = this.waiting;
    if (waiting.length === 0) return;
    const text = this.text;
    this.text = '';
    this.waiting = [];
    const settle = (error?: Error | null): void => {
      for (const done of waiting) done(error);
    };
    if (this.output.destroyed || this.output.writableEnded) return settle(new Error('the connection is closed'));
    this.output.write(text, 'utf8', settle);
  }
}

export class FrameWriter implements MessageWriter {
  private readonly batch: TickBatch;
  private errors = 0;
  private readonly errorEmitter = new Emitter<[Error, Message | undefined, number | undefined]>();
  private readonly closeEmitter = new Emitter<void>();

  constructor(private readonly output: Writable) {
    this.batch = new TickBatch(output);
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

  /** Queues one frame; `done` runs once the stream took the tick's chunk, or failed to. */
  protected send(message: Message, frame: Frame, done: (error?: Error | null) => void): void {
    this.batch.add(frame.text, (error) => {
      if (error) this.errorEmitter.fire([error, message, ++this.errors]);
      done(error);
    });
  }

  /** Writes what this tick queued, then ends the stream. */
  end(): void {
    this.batch.flush();
    this.output.end();
  }

  dispose(): void {
    this.errorEmitter.dispose();
    this.closeEmitter.dispose();
  }
}
