/**
 * A pass-through guard on the agent's stdout. The SDK answers a non-JSON line with a parse
 * error and carries on, but for a child process it means stdout is not a protocol channel (a
 * banner, a log line, the wrong program): we stop at the first such line and report it.
 */
import { DEFAULT_MAX_MESSAGE_BYTES } from '@agentclientprotocol/sdk';

const NEWLINE = 0x0a;
const PREVIEW_CHARS = 200;

export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
}

function isJsonObjectLine(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** A short, quoted, single-line excerpt of the offending output. */
function preview(text: string): string {
  return JSON.stringify(text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text);
}

/**
 * Bytes flow through unchanged; a complete line that is not one JSON object (or a line longer
 * than `maxLineBytes`) errors the stream before the SDK sees it, and `onViolation` says why.
 */
export function guardNdJson(
  onViolation: (violation: ProtocolViolation) => void,
  maxLineBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  let partial: Uint8Array[] = [];
  let partialBytes = 0;

  const reject = (controller: TransformStreamDefaultController<Uint8Array>, message: string): void => {
    const violation = new ProtocolViolation(message);
    partial = [];
    partialBytes = 0;
    onViolation(violation);
    controller.error(violation);
  };

  const checkLine = (controller: TransformStreamDefaultController<Uint8Array>, tail: Uint8Array): boolean => {
    const bytes = partial.length === 0 ? tail : Buffer.concat([...partial, tail]);
    partial = [];
    partialBytes = 0;
    const text = decoder.decode(bytes).trim();
    if (text === '' || isJsonObjectLine(text)) return true;
    reject(controller, `agent wrote non-JSON-RPC output on stdout: ${preview(text)}`);
    return false;
  };

  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      let start = 0;
      for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
        if (!checkLine(controller, chunk.subarray(start, newline))) return;
        start = newline + 1;
      }
      if (start < chunk.byteLength) {
        partial.push(chunk.subarray(start));
        partialBytes += chunk.byteLength - start;
        if (partialBytes > maxLineBytes) {
          reject(controller, `agent wrote a stdout line longer than ${maxLineBytes} bytes`);
          return;
        }
      }
      controller.enqueue(chunk);
    },
    flush(controller) {
      if (partial.length > 0) checkLine(controller, new Uint8Array(0));
    },
  });
}
