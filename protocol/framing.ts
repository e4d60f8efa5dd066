/**
 * LSP base-protocol framing, as both sides and the `connect` relay write and read it: a header
 * block ending in CRLF CRLF whose `Content-Length` gives the body's size in bytes, then the body.
 * Writers send exactly one header; readers take any header lines but need a valid length.
 */
import { jsonBytes } from './json-bytes.js';

export const HEADER_END = Buffer.from('\r\n\r\n', 'ascii');

/** One frame: the header and `body` in a single buffer (one write per message). */
export function frameBody(body: Buffer): Buffer {
  const header = `Content-Length: ${body.length}\r\n\r\n`;
  const frame = Buffer.allocUnsafe(header.length + body.length);
  frame.write(header, 0, 'ascii');
  body.copy(frame, header.length);
  return frame;
}

/** One frame as text (header and JSON body) and its length in bytes on the wire. */
export interface Frame {
  readonly text: string;
  readonly bytes: number;
}

/** One frame holding `message` as JSON, as text: writers hand a turn's frames to the socket as one string. */
export function frameOf(message: object): Frame {
  return frameOfJson(JSON.stringify(message));
}

/** One frame around a body already serialised (a writer that builds its JSON piece by piece). */
export function frameOfJson(body: string): Frame {
  const length = Buffer.byteLength(body, 'utf8');
  const text = `Content-Length: ${length}\r\n\r\n${body}`;
  // The header is ASCII: its bytes are its characters.
  return { text, bytes: text.length - body.length + length };
}

/**
 * A frame whose text is built when it is written: its size on the wire is known now
 * (json-bytes.ts), its JSON is made only once the peer takes it. A writer whose peer is not
 * reading keeps `message` (whose big strings the daemon holds anyway) instead of a copy of it.
 * `message` must not change until it is written.
 */
export interface DeferredFrame {
  readonly bytes: number;
  readonly build: () => string;
}

export function deferredFrameOf(message: object): DeferredFrame {
  const length = jsonBytes(message);
  return { bytes: `Content-Length: ${length}\r\n\r\n`.length + length, build: () => frameOf(message).text };
}

/** One frame holding `message` as JSON, as a buffer (a last write outside any writer, a relay). */
export function encodeFrame(message: object): Buffer {
  return Buffer.from(frameOf(message).text, 'utf8');
}

/**
 * The body length a header block declares (its text without the final CRLF CRLF), or why it is
 * not a header block we accept: a line without a name, a length that is not 1 to 12 digits, no
 * length at all.
 */
export function declaredLength(headerText: string): number | { readonly problem: string } {
  let length: number | undefined;
  for (const line of headerText.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) return { problem: `malformed header line ${JSON.stringify(line.slice(0, 80))}` };
    if (line.slice(0, colon).trim().toLowerCase() !== 'content-length') continue;
    const value = line.slice(colon + 1).trim();
    if (!/^\d{1,12}$/.test(value)) return { problem: `invalid Content-Length ${JSON.stringify(value.slice(0, 40))}` };
    length = Number(value);
  }
  return length ?? { problem: 'frame without Content-Length' };
}
