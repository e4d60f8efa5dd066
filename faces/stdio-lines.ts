/**
 * Newline-delimited JSON-RPC from a host, bounded: the faces' stdin. A line longer than the
 * limit (`limits.faceLineBytes`) is not buffered: its bytes are dropped as they arrive, keeping
 * only its first and last few hundred bytes, from which the request's id is recovered so the
 * host gets an error for that very call instead of waiting on it for ever. Every other line is
 * handed over whole; a line ends at `\n` (a `\r` before it is dropped) or at the end of input.
 */

/** The default cap on one input line of a face, in bytes (as the daemon's `maxFrameBytes`). */
export const DEFAULT_FACE_LINE_BYTES = 4 * 1024 * 1024;

/** How much of an oversize line is kept at each end, to find its id. */
const EDGE_BYTES = 512;

export interface LineSink {
  line(text: string): void;
  /** A line of `bytes` bytes, over the limit; `id` is its request's id when one could be read. */
  oversize(id: string | number | null, bytes: number): void;
}

export class BoundedLines {
  private parts: Buffer[] = [];
  private held = 0;
  /** Set while dropping the rest of an oversize line. */
  private dropping: { head: Buffer; tail: Buffer; bytes: number } | undefined;

  constructor(
    readonly maxLineBytes: number,
    private readonly sink: LineSink,
  ) {}

  push(chunk: Buffer): void {
    let from = 0;
    while (from < chunk.length) {
      const nl = chunk.indexOf(0x0a, from);
      const end = nl < 0 ? chunk.length : nl;
      this.take(chunk.subarray(from, end));
      if (nl < 0) return;
      this.finishLine();
      from = nl + 1;
    }
  }

  /** The input ended: a last line without its newline still counts. */
  end(): void {
    if (this.held > 0 || this.dropping) this.finishLine();
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.dropping) {
      this.dropping.bytes += piece.length;
      this.dropping.tail = lastBytes(Buffer.concat([this.dropping.tail, piece]));
      return;
    }
    if (this.held + piece.length <= this.maxLineBytes) {
      this.parts.push(piece);
      this.held += piece.length;
      return;
    }
    const start = Buffer.concat([...this.parts, piece]);
    this.dropping = { head: start.subarray(0, EDGE_BYTES), tail: lastBytes(start), bytes: start.length };
    this.parts = [];
    this.held = 0;
  }

  private finishLine(): void {
    const dropped = this.dropping;
    if (dropped) {
      this.dropping = undefined;
      this.sink.oversize(requestIdOf(dropped.head.toString('utf8'), dropped.tail.toString('utf8')), dropped.bytes);
      return;
    }
    const text = Buffer.concat(this.parts, this.held).toString('utf8').replace(/\r$/, '');
    this.parts = [];
    this.held = 0;
    if (text.trim() !== '') this.sink.line(text);
  }
}

function lastBytes(buffer: Buffer): Buffer {
  // A copy: the tail must not pin the whole chunk it came from.
  return Buffer.from(buffer.subarray(Math.max(0, buffer.length - EDGE_BYTES)));
}

const ID = String.raw`"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")`;
/** `{"jsonrpc":"2.0","id":…` or `{"id":…` at the start of the line. */
const HEAD_ID = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?${ID}`);
/** `…,"id":…}` closing the line (the MCP SDK writes the id last). */
const TAIL_ID = new RegExp(String.raw`,\s*${ID}\s*\}\s*$`);

/** The id of the request an oversize line carried, when the envelope's own id is at either end. */
export function requestIdOf(head: string, tail: string): string | number | null {
  const found = HEAD_ID.exec(head)?.[1] ?? TAIL_ID.exec(tail)?.[1];
  if (found === undefined) return null;
  try {
    const id = JSON.parse(found) as unknown;
    return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : null;
  } catch {
    return null;
  }
}

/** The error a host gets for an oversize line: -32600, naming the limit and its config key. */
export function oversizeError(id: string | number | null, bytes: number, maxLineBytes: number): object {
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: -32600,
      message: `input line of ${bytes} bytes is over the limit of ${maxLineBytes} bytes (limits.faceLineBytes); it was dropped`,
      data: { limit: 'limits.faceLineBytes', maxBytes: maxLineBytes },
    },
  };
}

/**
 * `input`'s lines as a byte stream of whole, bounded lines, for a protocol library that splits
 * lines itself without a bound (the ACP SDK's ndJsonStream); an oversize line goes to
 * `oversize` instead. Reading pauses while the consumer lags.
 */
export function boundedLineStream(
  input: NodeJS.ReadableStream,
  maxLineBytes: number,
  oversize: LineSink['oversize'],
): ReadableStream<Uint8Array> {
  let onData: (chunk: Buffer | string) => void = () => undefined;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const lines = new BoundedLines(maxLineBytes, {
          line: (text) => {
            controller.enqueue(Buffer.from(`${text}\n`));
            if ((controller.desiredSize ?? 1) <= 0) input.pause();
          },
          oversize,
        });
        let ended = false;
        const end = (): void => {
          if (ended) return;
          ended = true;
          lines.end();
          controller.close();
        };
        onData = (chunk) => lines.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
        input.on('data', onData);
        input.once('end', end);
        input.once('close', end);
        input.once('error', (error) => {
          if (!ended) controller.error(error);
          ended = true;
        });
      },
      pull() {
        input.resume();
      },
      cancel() {
        input.off('data', onData);
        input.pause();
      },
    },
    { highWaterMark: 64 },
  );
}
