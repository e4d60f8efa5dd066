/**
 * Seeing what the OpenAI SDK hides: until a streamed response's first `data:` line, the bytes a
 * provider sends (DeepSeek's SSE `: keep-alive` comments, blank lines) say "queued at the provider,
 * still alive". The SDK drops them, so the adapter would see silence. This fetch wraps the
 * response body: every byte passes through unchanged, and each keep-alive line before the first
 * data line is reported to the step that sent the request.
 *
 * The step is found through AsyncLocalStorage (`withStreamHooks`), since one SDK client (and so
 * one fetch) serves every step of an endpoint.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface StreamHooks {
  /** A keep-alive line (comment or blank) arrived before any data line. */
  onKeepAlive(): void;
}

const current = new AsyncLocalStorage<StreamHooks>();

/** Runs `fn` (which sends one request through a `keepAliveFetch`) with `hooks` as its listener. */
export function withStreamHooks<T>(hooks: StreamHooks, fn: () => T): T {
  return current.run(hooks, fn);
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export function keepAliveFetch(inner: Fetch = fetch): Fetch {
  return async (input, init) => {
    const hooks = current.getStore();
    const response = await inner(input, init);
    if (hooks === undefined || !response.ok || response.body === null) return response;
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) return response;
    return new Response(response.body.pipeThrough(watchPrelude(hooks)), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** Passes bytes through; reports keep-alive lines until the first line that is not one. */
function watchPrelude(hooks: StreamHooks): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  let line = '';
  let watching = true;
  return new TransformStream({
    transform(chunk, controller) {
      controller.enqueue(chunk);
      if (!watching) return;
      const text = decoder.decode(chunk, { stream: true });
      for (const char of text) {
        if (char === '\n') {
          const trimmed = line.replace(/\r$/, '');
          line = '';
          if (trimmed === '' || trimmed.startsWith(':')) {
            report(hooks);
            continue;
          }
          watching = false; // a data (or event) line: the answer has begun
          return;
        }
        // Only the line's start matters; a long data line need not be held.
        if (line.length < 8) line += char;
      }
    },
  });
}

function report(hooks: StreamHooks): void {
  try {
    hooks.onKeepAlive();
  } catch {
    // A listener must not break the stream.
  }
}
