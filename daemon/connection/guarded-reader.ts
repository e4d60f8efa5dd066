/**
 * A MessageReader for untrusted peers, in front of vscode-jsonrpc. The library's own reader
 * buffers any declared Content-Length, desynchronises on a frame without one, and drops batches,
 * object ids and non-JSON bodies without a reply. This reader bounds every frame, parses and
 * checks the JSON-RPC envelope itself, and reports each violation either as an error reply the
 * connection should send (the frame boundary was sound) or as fatal (the stream can't be trusted).
 *
 * Rule: only a well-formed envelope reaches the library, because the library trusts the shape it
 * is given (a `$/cancelRequest` without `params.id`, or a request id of null, throws inside it).
 *  - request: method string, id string or safe integer, params object → delivered;
 *  - notification: no id; `$/cancelRequest` needs params.id string or safe integer → else dropped;
 *  - response: an id (string, safe integer; null only on an error), exactly one of result/error,
 *    an error being {code: integer, message: string} → else dropped (there is no one to answer);
 *  - a request with a bad id is answered -32600 with id null (JSON-RPC 2.0 §5); a notification or
 *    response that is dropped is only counted and logged, never answered.
 */
import type { Readable } from 'node:stream';
import type { Message } from 'vscode-jsonrpc/node';
import { SplitMessageReader } from '../../common/frame-reader.js';
import { DEFAULT_MAX_FRAME_BYTES, JSONRPC_ERRORS } from '../../protocol/index.js';

export interface FrameLimits {
  /** Largest body accepted, in bytes. */
  readonly maxFrameBytes: number;
  /** Largest header block accepted, in bytes. */
  readonly maxHeaderBytes: number;
  /** Deepest nesting of arrays/objects accepted in a message. */
  readonly maxDepth: number;
}

export const DEFAULT_FRAME_LIMITS: FrameLimits = { maxFrameBytes: DEFAULT_MAX_FRAME_BYTES, maxHeaderBytes: 8 * 1024, maxDepth: 64 };

export type Violation =
  | {
      readonly kind: 'reply';
      readonly id: string | number | null;
      readonly code: number;
      readonly message: string;
      readonly data?: { readonly code: 'INVALID_REQUEST'; readonly field: string };
    }
  /** A notification or response that was unsound: not delivered, not answered. */
  | { readonly kind: 'dropped'; readonly message: string }
  | { readonly kind: 'fatal'; readonly message: string };


export class GuardedMessageReader extends SplitMessageReader {
  private dead = false;

  constructor(
    readable: Readable,
    private readonly limits: FrameLimits,
    private readonly onViolation: (violation: Violation) => void,
    /** Hears each request handed to the connection, by id (to count unanswered requests). */
    private readonly onRequest: (id: string | number | null) => void = () => undefined,
    /** Offered each sound message first; true when it took it (the connection's DirectLane). */
    private readonly take: (message: Message) => boolean = () => false,
  ) {
    super(readable, limits, (problem) => {
      this.dead = true;
      this.onViolation({ kind: 'fatal', message: problem });
    });
  }

  /** Stop handing messages over (and reading the peer) until `release`: backpressure. */
  hold(): void {
    this.splitter.pause();
    this.readable.pause();
  }

  /** Read nothing more from this peer and drop what it sent and was not yet split (it is being cut off). */
  abandon(): void {
    this.dead = true;
    this.splitter.discard();
    this.readable.pause();
  }

  release(): void {
    this.readable.resume();
    this.splitter.resume(); // what was already buffered
  }

  protected deliver(buffer: Buffer, start: number, end: number): void {
    if (this.dead) return;
    let message: unknown;
    try {
      message = JSON.parse(buffer.toString('utf8', start, end));
    } catch (error) {
      this.reply(null, JSONRPC_ERRORS.PARSE_ERROR, `parse error: ${(error as Error).message}`);
      return;
    }
    const checked = checkEnvelope(message, mayNestDeeper(buffer, start, end, this.limits.maxDepth) ? this.limits.maxDepth : undefined);
    if (typeof checked === 'string') {
      const id = idOf(message);
      this.reply(id, JSONRPC_ERRORS.INVALID_REQUEST, checked);
      return;
    }
    if ('drop' in checked) {
      this.onViolation({ kind: 'dropped', message: checked.drop });
      return;
    }
    const m = checked as { method?: string; id?: unknown; params?: unknown };
    if (m.method !== undefined) {
      // Every method takes one params object: positional params would be spread into the handler.
      if (Array.isArray(m.params)) {
        if ('id' in m) {
          this.onViolation({
            kind: 'reply',
            id: idOf(m),
            code: JSONRPC_ERRORS.INVALID_PARAMS,
            message: 'params must be an object (by-name), not an array',
            data: { code: 'INVALID_REQUEST', field: '/' },
          });
        }
        return;
      }
      m.params ??= {};
      if ('id' in m) this.onRequest(idOf(m));
    }
    if (!this.take(checked)) this.callback?.(checked);
  }

  private reply(id: string | number | null, code: number, message: string): void {
    this.onViolation({ kind: 'reply', id, code, message });
  }
}

/** The id to answer with: only a well-formed id is echoed, anything else gets null. */
function idOf(message: unknown): string | number | null {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return null;
  const id = (message as { id?: unknown }).id;
  return isId(id) ? id : null;
}

/** A JSON-RPC id the daemon can correlate: a string or a safe integer (never null, a float or an object). */
export function isId(id: unknown): id is string | number {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Returns the message when its envelope is sound, a reason string when it must be answered
 * -32600, or `{ drop }` for a notification or response that is unsound (no one to answer).
 * `maxDepth` undefined: the body cannot nest that deep (mayNestDeeper), so it is not walked.
 */
function checkEnvelope(message: unknown, maxDepth: number | undefined): Message | string | { drop: string } {
  if (Array.isArray(message)) return 'batches are not supported: send one request per frame';
  if (!isObject(message)) return 'a message must be a JSON object';
  const m = message;
  if (m['jsonrpc'] !== '2.0') return 'jsonrpc must be "2.0"';
  if ('method' in m) {
    if (typeof m['method'] !== 'string' || m['method'].length === 0) return 'method must be a non-empty string';
    if ('params' in m && (typeof m['params'] !== 'object' || m['params'] === null)) {
      return 'params must be an object or an array';
    }
    if ('id' in m) {
      if (!isId(m['id'])) return 'a request id must be a string or an integer';
    } else if (m['method'] === '$/cancelRequest' && !(isObject(m['params']) && isId(m['params']['id']))) {
      return { drop: '$/cancelRequest needs params.id, a string or an integer' };
    }
  } else if ('result' in m || 'error' in m) {
    const unsound = responseProblem(m);
    if (unsound) return { drop: unsound };
  } else {
    return 'a message must be a request, a notification or a response';
  }
  if (maxDepth !== undefined && depthExceeds(message, maxDepth)) return `message nested deeper than ${maxDepth} levels`;
  return message as Message;
}

function responseProblem(m: Record<string, unknown>): string | undefined {
  if ('result' in m === 'error' in m) return 'a response has exactly one of result and error';
  if ('result' in m) return isId(m['id']) ? undefined : 'a result must answer a string or integer id';
  const error = m['error'];
  if (!isObject(error) || !Number.isSafeInteger(error['code']) || typeof error['message'] !== 'string') {
    return 'an error must be {code: integer, message: string}';
  }
  // id null: the peer could not read one of our requests; nothing to correlate, only to log.
  return isId(m['id']) ? undefined : 'an error response answers no request we can name';
}

/**
 * Whether the body could nest deeper than `maxDepth`: it cannot with no more opening brackets
 * than that. Counting them in a small body (most messages: a start has a handful) is cheaper than
 * walking the parsed message; a big one is walked, as counting would cost about a parse.
 */
function mayNestDeeper(buffer: Buffer, start: number, end: number, maxDepth: number): boolean {
  if (end - start > SMALL_BODY_BYTES) return true;
  let openings = 0;
  for (let i = start; i < end; i++) {
    const byte = buffer[i];
    if ((byte === 0x7b || byte === 0x5b) && ++openings > maxDepth) return true;
  }
  return false;
}

const SMALL_BODY_BYTES = 4096;

function depthExceeds(root: unknown, maxDepth: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > maxDepth) return true;
    for (const child of Object.values(value)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}
