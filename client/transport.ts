/**
 * A byte channel to one daemon: read by vscode-jsonrpc, written by the shared frame writer
 * (one write per tick, common/frame-writer.ts). Each kind (unix socket, private stdio
 * daemon, caller-supplied streams) says who is on the other end and reports, once, that the
 * peer is gone, so the channel can fail everything pending instead of hanging.
 */
import type { Readable, Writable } from 'node:stream';
import type { MessageReader, MessageWriter } from 'vscode-jsonrpc/node';
import { FrameMessageReader } from '../common/frame-reader.js';
import { FrameWriter } from '../common/frame-writer.js';

export interface Transport {
  readonly reader: MessageReader;
  readonly writer: MessageWriter;
  /** Who is on the other end, for error messages (evaluated late: an exit code may arrive last). */
  describe(): string;
  /** Called once when the peer is gone; `reason` says how. Late subscribers are called at once. */
  onClosed(listener: (reason: string) => void): void;
  /** Release the transport; resolves once it is down. Idempotent. */
  close(): Promise<void>;
}

/** A once-only "closed" signal that remembers its reason for late subscribers. */
export class ClosedSignal {
  private reason: string | undefined;
  private readonly listeners: Array<(reason: string) => void> = [];

  get fired(): boolean {
    return this.reason !== undefined;
  }

  fire(reason: string): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    for (const listener of this.listeners.splice(0)) listener(reason);
  }

  subscribe(listener: (reason: string) => void): void {
    if (this.reason !== undefined) listener(this.reason);
    else this.listeners.push(listener);
  }
}

/** Caller-supplied streams (a duplex, a pair of pipes): for embedding and tests. */
export function streamTransport(streams: { readonly reader: Readable; readonly writer: Writable }): Transport {
  const { reader, writer } = streams;
  const closed = new ClosedSignal();
  reader.once('end', () => closed.fire('stream ended'));
  reader.once('close', () => closed.fire('stream closed'));
  reader.on('error', (error: Error) => closed.fire(`stream error: ${error.message}`));
  // A write to a dead peer must not crash the process; the channel learns of it via the reader.
  writer.on('error', (error: Error) => closed.fire(`stream error: ${error.message}`));
  let closing: Promise<void> | undefined;
  return {
    reader: new FrameMessageReader(reader, (problem) => closed.fire(`unreadable framing from the daemon: ${problem}`)),
    writer: new FrameWriter(writer),
    describe: () => 'the subagentd daemon on the supplied stream',
    onClosed: (listener) => closed.subscribe(listener),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        writer.end(() => resolve());
        reader.destroy();
        // `end`'s callback never runs on a writer that is already destroyed.
        if (writer.destroyed) resolve();
      });
      return closing;
    },
  };
}
