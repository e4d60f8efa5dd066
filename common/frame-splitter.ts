/**
 * JSON-RPC framing on the way in, one home for every reader of the wire (the daemon's guarded
 * reader, the client's reader, the `connect` relay): a byte stream split into Content-Length
 * frames, each body handed over as a range of the buffer it arrived in.
 *
 * Why not vscode-jsonrpc's reader: it copies every chunk into its own buffer, decodes the header
 * into a map, and hands the body to an asynchronous decoder (a promise per message); a frame
 * that arrived whole in one chunk here costs one indexOf, one short header check and no copy.
 * A frame split over chunks is joined once, when its last byte is in (no quadratic re-copying).
 *
 * Rules:
 * - Bodies are handed over in order, synchronously from `push`, while not paused; `pause` takes
 *   effect between two frames, and `resume` goes on with what is buffered.
 * - A header block over `maxHeaderBytes`, one without a valid Content-Length, or a declared body
 *   over `maxFrameBytes` is fatal: the stream can't be trusted after it. `onFatal` hears why
 *   once, nothing is handed over any more, and what is buffered stays (`rest`).
 */
import { HEADER_END, declaredLength } from '../protocol/index.js';

export interface SplitLimits {
  /** Largest body accepted, in bytes. */
  readonly maxFrameBytes: number;
  /** Largest header block accepted, in bytes. */
  readonly maxHeaderBytes: number;
}

/** Receives one body: `buffer[start, end)`, a view of the bytes as they arrived (never overwritten). */
export type BodyHandler = (buffer: Buffer, start: number, end: number) => void;

const EMPTY = Buffer.alloc(0);
/** The header every writer of ours (and vscode-jsonrpc's) sends: one line, read without splitting. */
const PLAIN_HEADER = 'Content-Length: ';
const DIGITS = /^\d{1,12}$/;

export class FrameSplitter {
  /** Bytes not yet consumed start at `offset` in `head`; chunks that came after it wait in `tail`. */
  private head: Buffer = EMPTY;
  private offset = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** The body length the last header declared, -1 while reading a header. */
  private bodyLength = -1;
  private paused = false;
  private dead = false;

  constructor(
    private readonly limits: SplitLimits,
    private readonly onBody: BodyHandler,
    private readonly onFatal: (problem: string) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.dead || chunk.length === 0) return;
    if (this.offset === this.head.length && this.tail.length === 0) {
      this.head = chunk;
      this.offset = 0;
    } else {
      this.tail.push(chunk);
      this.tailBytes += chunk.length;
    }
    this.split();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.split();
  }

  /** Stop for good and let go of everything buffered: the peer is being cut off unread. */
  discard(): void {
    this.dead = true;
    this.head = EMPTY;
    this.offset = 0;
    this.tail = [];
    this.tailBytes = 0;
  }

  /** Whatever is buffered and not yet handed over (a relay that stops splitting passes it on raw). */
  rest(): Buffer {
    this.gather();
    const rest = this.head.subarray(this.offset);
    this.head = EMPTY;
    this.offset = 0;
    return rest;
  }

  private get buffered(): number {
    return this.head.length - this.offset + this.tailBytes;
  }

  /** Joins the waiting chunks behind what is left of the head: one copy. */
  private gather(): void {
    if (this.tail.length === 0) return;
    this.head = Buffer.concat([this.head.subarray(this.offset), ...this.tail]);
    this.offset = 0;
    this.tail = [];
    this.tailBytes = 0;
  }

  private split(): void {
    while (!this.dead && !this.paused) {
      if (this.bodyLength < 0) {
        if (!this.readHeader()) return;
        continue;
      }
      const length = this.bodyLength;
      if (this.buffered < length) return;
      if (this.head.length - this.offset < length) this.gather();
      const start = this.offset;
      const buffer = this.head;
      this.offset += length;
      this.bodyLength = -1;
      if (this.offset === buffer.length && this.tail.length === 0) {
        this.head = EMPTY;
        this.offset = 0;
      }
      this.onBody(buffer, start, start + length);
    }
  }

  /** Consumes one header block; false when more bytes are needed or the stream went bad. */
  private readHeader(): boolean {
    let end = this.head.indexOf(HEADER_END, this.offset);
    if (end < 0 && this.tail.length > 0) {
      this.gather();
      end = this.head.indexOf(HEADER_END, this.offset);
    }
    const max = this.limits.maxHeaderBytes;
    if (end < 0) {
      if (this.buffered > max + HEADER_END.length) this.fatal(`header block over ${max} bytes`);
      return false;
    }
    if (end - this.offset > max) return this.fatal(`header block over ${max} bytes`);
    const length = headerLength(this.head.toString('latin1', this.offset, end));
    if (typeof length !== 'number') return this.fatal(length.problem);
    if (length > this.limits.maxFrameBytes) return this.fatal(`frame of ${length} bytes over the ${this.limits.maxFrameBytes}-byte limit`);
    this.offset = end + HEADER_END.length;
    this.bodyLength = length;
    return true;
  }

  private fatal(problem: string): false {
    this.dead = true;
    this.onFatal(problem);
    return false;
  }
}

/** The length a header block declares: the one-line form every writer sends, else the general rule. */
function headerLength(text: string): number | { readonly problem: string } {
  if (text.startsWith(PLAIN_HEADER) && !text.includes('\r')) {
    const digits = text.slice(PLAIN_HEADER.length);
    if (DIGITS.test(digits)) return Number(digits);
  }
  return declaredLength(text);
}
