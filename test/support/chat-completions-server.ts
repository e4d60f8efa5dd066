/**
 * A scriptable chat-completions server for tests: node:http on 127.0.0.1, a random port, the real
 * wire format (SSE `data: {...}` chunks with the API's field names, `data: [DONE]`, `: keep-alive`
 * comments, JSON error bodies, `Retry-After`). Each request to `POST /v1/chat/completions` takes
 * the next scripted response from a queue; every request is recorded with its parsed body.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One action while writing a streamed response. */
export type StreamStep =
  /** `data: <json>\n\n` */
  | { readonly data: unknown }
  /** Written verbatim (e.g. a malformed data line). */
  | { readonly raw: string }
  /** `: <text>\n\n`, an SSE comment such as DeepSeek's `keep-alive`. */
  | { readonly comment: string }
  /** Pause before the next step. */
  | { readonly wait: number }
  /** Pause until the test lets the response go on (the client leaving ends the wait too). */
  | { readonly gate: Promise<unknown> }
  /** `data: [DONE]\n\n` */
  | { readonly done: true }
  /**
   * Write `step` every `everyMs` until the client goes away, or for at most `forMs`
   * (default 10 s, so a test never leaves a writer running).
   */
  | { readonly repeat: { readonly data: unknown } | { readonly comment: string }; readonly everyMs: number; readonly forMs?: number };

export type ScriptedResponse =
  | {
      readonly type: 'stream';
      readonly steps: readonly StreamStep[];
      readonly headers?: Readonly<Record<string, string>>;
    }
  | {
      readonly type: 'error';
      readonly status: number;
      readonly message: string;
      readonly errorType?: string;
      readonly headers?: Readonly<Record<string, string>>;
    };

/** A response computed from the request body, as a model would answer from what it was sent. */
export type Responder = (body: any) => ScriptedResponse;

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The parsed JSON body (`undefined` if it was not JSON). */
  readonly body: any;
  readonly receivedAt: number;
  /** SSE comments and data events written so far on this request's response. */
  commentsSent: number;
  dataSent: number;
  /** Resolves when the response is finished or the client disconnected; true if the client left first. */
  readonly closed: Promise<boolean>;
}

export interface ChatCompletionsServer {
  /** Base URL to give the SDK, e.g. `http://127.0.0.1:1234/v1`. */
  readonly baseUrl: string;
  readonly requests: RecordedRequest[];
  readonly load: ServerLoad;
  enqueue(...responses: Array<ScriptedResponse | Responder>): void;
  close(): Promise<void>;
}

let chunkSerial = 0;

/** A `chat.completion.chunk` with one choice, shaped like DeepSeek's and OpenAI's. */
export function chunk(
  delta: Record<string, unknown>,
  extra: { finish_reason?: string | null; usage?: Record<string, unknown> | null; model?: string } = {},
): Record<string, unknown> {
  return {
    id: `chatcmpl-test-${++chunkSerial}`,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: extra.model ?? 'deepseek-chat',
    system_fingerprint: 'fp_test',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: extra.finish_reason ?? null }],
    usage: extra.usage ?? null,
  };
}

/** OpenAI's trailing usage chunk (`stream_options.include_usage`): no choices, only usage. */
export function usageOnlyChunk(usage: Record<string, unknown>): Record<string, unknown> {
  return {
    id: `chatcmpl-test-${++chunkSerial}`,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: 'gpt-test',
    choices: [],
    usage,
  };
}

/** A complete streamed answer: a role chunk, one chunk per text part, a finish chunk, [DONE]. */
export function textResponse(
  parts: readonly string[],
  opts: { finish?: string; usage?: Record<string, unknown> } = {},
): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      ...parts.map((p) => ({ data: chunk({ content: p }) })),
      { data: chunk({ content: '' }, { finish_reason: opts.finish ?? 'stop', usage: opts.usage ?? null }) },
      { done: true },
    ],
  };
}

/** A streamed answer that keeps the step open (empty deltas every 50 ms) for `ms`, then says `answer`. */
export function slowTextResponse(answer: string, ms: number): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      { repeat: { data: chunk({ content: '' }) }, everyMs: 50, forMs: ms },
      { data: chunk({ content: answer }, { finish_reason: 'stop' }) },
      { done: true },
    ],
  };
}

export function errorResponse(
  status: number,
  message: string,
  headers?: Readonly<Record<string, string>>,
): ScriptedResponse {
  return headers === undefined ? { type: 'error', status, message } : { type: 'error', status, message, headers };
}

/** A streamed step that calls tools (one chunk per call, arguments whole). */
export function toolCallResponse(calls: ReadonlyArray<{ id: string; name: string; arguments: string }>): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      ...calls.map((call, index) => ({
        data: chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }] }),
      })),
      { data: chunk({}, { finish_reason: 'tool_calls' }) },
      { done: true },
    ],
  };
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface ChatCompletionsServerOptions {
  /** Answers a request when the queue is empty (a real agent's request count is not known ahead). */
  readonly fallback?: Responder;
  /**
   * A provider's concurrency cap: while `max` responses are streaming, a further request is
   * answered `status` (default 429) with `Retry-After: retryAfter` (default `1`), before it
   * takes anything from the queue.
   */
  readonly streamLimit?: { readonly max: number; readonly retryAfter?: string; readonly status?: number };
}

/** What the server saw of its load. */
export interface ServerLoad {
  /** Responses streaming now. */
  active: number;
  /** The most responses that ever streamed at once. */
  peak: number;
  /** Requests refused by `streamLimit`. */
  refused: number;
  /** Requests answered with a stream. */
  streamed: number;
  /** Requests being answered now, refused ones included (what the server sees at once). */
  open: number;
  /** The most requests open at once (a test may reset it to `open` to watch from then on). */
  openPeak: number;
}

export async function startChatCompletionsServer(options: ChatCompletionsServerOptions = {}): Promise<ChatCompletionsServer> {
  const queue: Array<ScriptedResponse | Responder> = [];
  const requests: RecordedRequest[] = [];
  const load: ServerLoad = { active: 0, peak: 0, refused: 0, streamed: 0, open: 0, openPeak: 0 };

  const server = createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (piece: Buffer) => pieces.push(piece));
    req.on('end', () => {
      const raw = Buffer.concat(pieces).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      let clientLeft = false;
      const closed = new Promise<boolean>((resolve) => {
        res.on('close', () => {
          clientLeft = !res.writableFinished;
          resolve(clientLeft);
        });
      });
      const record: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        receivedAt: Date.now(),
        commentsSent: 0,
        dataSent: 0,
        closed,
      };
      requests.push(record);
      load.open += 1;
      load.openPeak = Math.max(load.openPeak, load.open);
      void closed.then(() => {
        load.open -= 1;
      });

      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        sendError(res, 404, `no route for ${req.method} ${req.url}`);
        return;
      }
      const limit = options.streamLimit;
      if (limit !== undefined && load.active >= limit.max) {
        load.refused += 1;
        sendError(res, limit.status ?? 429, 'Rate limit reached: too many concurrent requests', { 'retry-after': limit.retryAfter ?? '1' }, 'rate_limit_error');
        return;
      }
      const queued = queue.shift();
      const next = typeof queued === 'function' ? queued(body) : (queued ?? options.fallback?.(body));
      if (next === undefined) {
        sendError(res, 500, 'test server: no scripted response left');
        return;
      }
      if (next.type === 'error') {
        sendError(res, next.status, next.message, next.headers, next.errorType);
        return;
      }
      load.active += 1;
      load.streamed += 1;
      load.peak = Math.max(load.peak, load.active);
      // A stream's slot is free once the server has written its end (as a provider's is once it
      // has generated the answer), or the client left.
      let freed = false;
      const free = (): void => {
        if (freed) return;
        freed = true;
        load.active -= 1;
      };
      res.once('finish', free);
      void closed.then(free);
      void writeStream(res, next, record, () => clientLeft);
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    load,
    enqueue: (...responses) => {
      queue.push(...responses);
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
  errorType = 'invalid_request_error',
): void {
  const body = JSON.stringify({ error: { message, type: errorType, param: null, code: null } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

async function writeStream(
  res: ServerResponse,
  script: Extract<ScriptedResponse, { type: 'stream' }>,
  record: RecordedRequest,
  clientLeft: () => boolean,
): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...script.headers,
  });
  res.flushHeaders();
  const gone = (): boolean => clientLeft() || res.destroyed;
  const writeOne = (step: { readonly data: unknown } | { readonly comment: string }): void => {
    if ('comment' in step) {
      res.write(`: ${step.comment}\n\n`);
      record.commentsSent++;
    } else {
      res.write(`data: ${JSON.stringify(step.data)}\n\n`);
      record.dataSent++;
    }
  };

  for (const step of script.steps) {
    if (gone()) return;
    if ('wait' in step) {
      await delay(step.wait);
    } else if ('gate' in step) {
      await Promise.race([step.gate, record.closed]);
    } else if ('done' in step) {
      res.write('data: [DONE]\n\n');
    } else if ('raw' in step) {
      res.write(step.raw);
    } else if ('repeat' in step) {
      const until = Date.now() + (step.forMs ?? 10_000);
      while (!gone() && Date.now() < until) {
        writeOne(step.repeat);
        await delay(step.everyMs);
      }
    } else {
      writeOne(step);
    }
  }
  if (!gone()) res.end();
}
