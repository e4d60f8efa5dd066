/**
 * A MessageWriter that knows how many messages it has not yet handed to the socket.
 * vscode-jsonrpc queues writes inside its own writer (the socket's `writableLength` stays 0), so
 * this count is the daemon's only measure of a client that reads slowly or not at all.
 */
import type { Event, Message, MessageWriter } from 'vscode-jsonrpc/node';

export class CountingWriter implements MessageWriter {
  private inFlight = 0;
  private idle: Array<() => void> = [];

  /** `onChange` hears every change of the count; `written` is the message just handed over. */
  constructor(
    private readonly inner: MessageWriter,
    private readonly onChange: (written?: Message) => void = () => undefined,
  ) {}

  get unsent(): number {
    return this.inFlight;
  }

  get onError(): Event<[Error, Message | undefined, number | undefined]> {
    return this.inner.onError;
  }

  get onClose(): Event<void> {
    return this.inner.onClose;
  }

  async write(message: Message): Promise<void> {
    this.inFlight += 1;
    this.onChange();
    try {
      await this.inner.write(message);
    } finally {
      this.inFlight -= 1;
      this.onChange(message);
      if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
    }
  }

  /** Resolves once nothing is unsent, or after `timeoutMs` (a peer that never reads). */
  drained(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  end(): void {
    this.inner.end();
  }

  dispose(): void {
    this.inner.dispose();
  }
}
