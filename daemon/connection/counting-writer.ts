/**
 * The daemon's MessageWriter: frames each message as one buffer (header and body in a single
 * write, where vscode-jsonrpc's writer makes two and waits for each), keeps the stream's order
 * without waiting between messages, and counts what it has not yet handed to the socket. That
 * count is the daemon's measure of a client that reads slowly or not at all: the library's own
 * writer queues internally, so the socket's `writableLength` says nothing.
 *
 * A write never rejects: a failed write (EPIPE on a peer that hung up, a destroyed socket) is
 * reported on `onError` and its promise resolves. vscode-jsonrpc drops some write promises on the
 * floor (its replies), so a rejection there would be an unhandled rejection in the daemon.
 */
import type { Writable } from 'node:stream';
import { Emitter, type Event, type Message, type MessageWriter } from 'vscode-jsonrpc/node';
import { encodeFrame } from '../../protocol/index.js';
import { within } from '../../common/bounded-wait.js';

export class CountingWriter implements MessageWriter {
  private inFlight = 0;
  private inFlightBytes = 0;
  private corked = false;
  private errors = 0;
  private refused = false;
  private idle: Array<() => void> = [];
  private readonly errorEmitter = new Emitter<[Error, Message | undefined, number | undefined]>();
  private readonly closeEmitter = new Emitter<void>();

  /**
   * `onChange` hears every change of the count; `written` is the message just handed over.
   * `bound.maxUnsentBytes` caps the bytes not yet taken by the socket: a frame that would go past
   * it while something is still unsent is not written, and `bound.onOverLimit` hears it once (the
   * owner closes the connection). A single frame bigger than the bound still goes to a peer
   * that has taken everything else.
   */
  constructor(
    private readonly output: Writable,
    private readonly onChange: (written?: Message) => void = () => undefined,
    private readonly bound: { readonly maxUnsentBytes: number; readonly onOverLimit: (unsentBytes: number) => void } = {
      maxUnsentBytes: Number.POSITIVE_INFINITY,
      onOverLimit: () => undefined,
    },
  ) {
    output.on('close', () => this.closeEmitter.fire());
    // A stream without an 'error' listener throws its error (stdout's EPIPE) as an uncaught exception.
    output.on('error', (error: Error) => this.errorEmitter.fire([error, undefined, ++this.errors]));
  }

  get unsent(): number {
    return this.inFlight;
  }

  get unsentBytes(): number {
    return this.inFlightBytes;
  }

  get onError(): Event<[Error, Message | undefined, number | undefined]> {
    return this.errorEmitter.event;
  }

  get onClose(): Event<void> {
    return this.closeEmitter.event;
  }

  /** True once a frame was refused for the byte bound: nothing more is written. */
  get overLimit(): boolean {
    return this.refused;
  }

  write(message: Message): Promise<void> {
    if (this.refused) return Promise.resolve();
    const frame = encodeFrame(message);
    if (this.inFlightBytes > 0 && this.inFlightBytes + frame.length > this.bound.maxUnsentBytes) {
      this.refused = true;
      this.bound.onOverLimit(this.inFlightBytes);
      return Promise.resolve();
    }
    this.inFlight += 1;
    this.inFlightBytes += frame.length;
    this.onChange();
    return new Promise<void>((resolve) => {
      const done = (error?: Error | null): void => {
        this.inFlight -= 1;
        this.inFlightBytes -= frame.length;
        this.onChange(message);
        if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
        if (error) {
          this.errors += 1;
          this.errorEmitter.fire([error, message, this.errors]);
        }
        resolve();
      };
      if (this.output.destroyed || this.output.writableEnded) return done(new Error('the connection is closed'));
      // Frames written in one turn (a start's notification and its reply) leave in one syscall.
      if (!this.corked) {
        this.corked = true;
        this.output.cork();
        process.nextTick(() => {
          this.corked = false;
          this.output.uncork();
        });
      }
      this.output.write(frame, done);
    });
  }

  /** Resolves once nothing is unsent, or after `timeoutMs` (a peer that never reads). */
  drained(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return within(new Promise<void>((resolve) => this.idle.push(resolve)), timeoutMs).then(() => undefined);
  }

  end(): void {
    this.output.end();
  }

  dispose(): void {
    this.errorEmitter.dispose();
    this.closeEmitter.dispose();
  }
}
