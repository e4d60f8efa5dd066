/**
 * MessageReaders on the shared frame splitter (frame-splitter.ts). `SplitMessageReader` feeds a
 * stream's chunks to the splitter and its close and errors to vscode-jsonrpc; each reader says
 * what a body becomes. The daemon's is guarded (daemon/connection/guarded-reader.ts); the
 * client's is `FrameMessageReader`, in place of the library's reader (a copy per chunk and a
 * promise per message).
 *
 * The daemon is trusted to speak the protocol, so the client's reader checks no envelope (the
 * client's RpcChannel checks every payload against its declaration). Failures:
 * - a frame whose body is not a JSON object is reported on `onError` and dropped: its boundary
 *   was sound, so the messages after it are still read;
 * - framing that goes bad (no valid Content-Length, a body over the limit) is fatal: reported on
 *   `onError`, then `onFatal` with the reason, whose caller closes the stream. Nothing more is read.
 */
import type { Readable } from 'node:stream';
import type { DataCallback, Disposable, Message } from 'vscode-jsonrpc/node';
import { jsonrpc } from '../protocol/jsonrpc-runtime.js';
import { FrameSplitter, type SplitLimits } from './frame-splitter.js';

/**
 * A daemon's answers are bounded by its own limits (output budgets, pages); this only keeps a
 * corrupt length from making the client buffer without end.
 */
export const CLIENT_FRAME_LIMITS: SplitLimits = { maxFrameBytes: 256 * 1024 * 1024, maxHeaderBytes: 8 * 1024 };

/**
 * A MessageReader over FrameSplitter: the stream's chunks go to the splitter, its close and
 * errors to the library; subclasses turn each body into messages (`deliver`).
 */
export abstract class SplitMessageReader extends jsonrpc.AbstractMessageReader {
  protected callback: DataCallback | undefined;
  protected readonly splitter: FrameSplitter;

  constructor(
    protected readonly readable: Readable,
    limits: SplitLimits,
    onFatal: (problem: string) => void,
  ) {
    super();
    this.splitter = new FrameSplitter(limits, (buffer, start, end) => this.deliver(buffer, start, end), onFatal);
  }

  protected abstract deliver(buffer: Buffer, start: number, end: number): void;

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    const onData = (chunk: Buffer): void => this.splitter.push(chunk);
    const onClose = (): void => this.fireClose();
    const onError = (error: Error): void => this.fireError(error);
    this.readable.on('data', onData);
    this.readable.on('close', onClose);
    this.readable.on('end', onClose);
    this.readable.on('error', onError);
    return {
      dispose: () => {
        this.readable.off('data', onData);
        this.readable.off('close', onClose);
        this.readable.off('end', onClose);
        this.readable.off('error', onError);
      },
    };
  }
}

export class FrameMessageReader extends SplitMessageReader {
  constructor(readable: Readable, onFatal: (problem: string) => void = () => undefined, limits: SplitLimits = CLIENT_FRAME_LIMITS) {
    super(readable, limits, (problem) => {
      this.fireError(new Error(`unreadable framing from the peer: ${problem}`));
      onFatal(problem);
    });
  }

  protected deliver(buffer: Buffer, start: number, end: number): void {
    let message: unknown;
    try {
      message = JSON.parse(buffer.toString('utf8', start, end));
    } catch (error) {
      this.fireError(new Error(`a frame from the peer is not JSON: ${(error as Error).message}`));
      return;
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      this.fireError(new Error('a frame from the peer is not a JSON-RPC message object'));
      return;
    }
    this.callback?.(message as Message);
  }
}
