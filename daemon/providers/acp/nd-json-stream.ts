/**
 * The agent's stdio as the SDK's message stream: newline-delimited JSON-RPC, each stdout line
 * read, decoded and parsed once. (The SDK's own `ndJsonStream` copies each line into a growing
 * buffer before decoding it, and a guard in front of it had to parse every line as well; for an
 * agent streaming megabytes, that was four copies of each line and two parses.)
 *
 * Rules:
 * - A complete line that is not one JSON object, or a line longer than `maxLineBytes`, is a
 *   protocol violation: the SDK never sees it, `onViolation` hears why, and the stream errors.
 *   For a child process it means stdout is not a protocol channel (a banner, a log line, the
 *   wrong program). Blank lines are skipped. An unterminated last line is read as a line.
 * - Back-pressure: stdout is paused while the SDK has `HIGH_WATER` messages it has not taken.
 * - Messages to the agent are written one at a time, each as one line.
 */
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type * as acp from '@agentclientprotocol/sdk';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@agentclientprotocol/sdk';

const NEWLINE = 0x0a;
const PREVIEW_CHARS = 200;
/** Parsed messages the SDK has not taken yet, past which stdout is paused. */
const HIGH_WATER = 16;

export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
}

/** A short, quoted, single-line excerpt of the offending output. */
function preview(text: string): string {
  return JSON.stringify(text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text);
}

export function agentStream(
  stdout: Readable,
  stdin: Writable,
  onViolation: (violation: ProtocolViolation) => void,
  maxLineBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
): acp.Stream {
  return { readable: agentMessages(stdout, onViolation, maxLineBytes), writable: agentWriter(stdin) };
}

/** The JSON-RPC messages on `stdout`, one per line (see the header). */
export function agentMessages(
  stdout: Readable,
  onViolation: (violation: ProtocolViolation) => void,
  maxLineBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
): ReadableStream<acp.AnyMessage> {
  const decoder = new StringDecoder('utf8');
  /** The current line's text so far (a line may span many chunks), and its bytes. */
  let partial = '';
  let partialBytes = 0;
  let done = false;
  let controller!: ReadableStreamDefaultController<acp.AnyMessage>;

  const stop = (): void => {
    done = true;
    stdout.off('data', onData);
    // Read on to the end, so the pipe closes and the agent never blocks on a full pipe.
    stdout.resume();
  };
  const violate = (message: string): void => {
    stop();
    const violation = new ProtocolViolation(message);
    onViolation(violation);
    controller.error(violation);
  };
  /** One whole line: false when it broke the protocol (and the stream is failed). */
  const line = (text: string): boolean => {
    const trimmed = text.trim();
    if (trimmed === '') return true;
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      value = undefined;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      violate(`agent wrote non-JSON-RPC output on stdout: ${preview(trimmed)}`);
      return false;
    }
    controller.enqueue(value as acp.AnyMessage);
    return true;
  };
  function onData(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      if (partialBytes + newline - start > maxLineBytes) return violate(`agent wrote a stdout line longer than ${maxLineBytes} bytes`);
      const text = partial + decoder.write(chunk.subarray(start, newline)) + decoder.end();
      partial = '';
      partialBytes = 0;
      if (!line(text)) return;
      start = newline + 1;
    }
    if (start < chunk.length) {
      partialBytes += chunk.length - start;
      if (partialBytes > maxLineBytes) return violate(`agent wrote a stdout line longer than ${maxLineBytes} bytes`);
      partial += decoder.write(chunk.subarray(start));
    }
    if ((controller.desiredSize ?? 1) <= 0) stdout.pause();
  }

  return new ReadableStream<acp.AnyMessage>(
    {
      start(c) {
        controller = c;
        stdout.on('data', onData);
        stdout.once('end', () => {
          if (done) return;
          done = true;
          if (partial !== '' || partialBytes > 0) {
            if (!line(partial + decoder.end())) return;
          }
          controller.close();
        });
        stdout.once('error', (error) => {
          if (done) return;
          stop();
          controller.error(error);
        });
      },
      pull() {
        if (!done) stdout.resume();
      },
      cancel() {
        stop();
      },
    },
    { highWaterMark: HIGH_WATER },
  );
}

/** Messages to the agent, one line each, one write at a time (the stream waits for each). */
function agentWriter(stdin: Writable): WritableStream<acp.AnyMessage> {
  return new WritableStream<acp.AnyMessage>({
    write(message) {
      return new Promise<void>((resolve, reject) => {
        stdin.write(`${JSON.stringify(message)}\n`, (error) => (error ? reject(error) : resolve()));
      });
    },
  });
}
