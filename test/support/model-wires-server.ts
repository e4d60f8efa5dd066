/**
 * A fake model server for the real third-party ACP agents whose model APIs are not chat
 * completions: node:http on 127.0.0.1, a random port, every answer a short text in the real wire
 * format of the API the request names.
 *
 * - Anthropic Messages (`POST /v1/messages`, Claude through claude-agent-acp): SSE `message_start`,
 *   `content_block_start`, `content_block_delta` (text_delta), `content_block_stop`,
 *   `message_delta` (stop_reason end_turn), `message_stop`; non-streaming requests get the JSON
 *   message; `/v1/messages/count_tokens` gets a count.
 * - OpenAI Responses (`POST /v1/responses`, Codex through codex-acp): SSE `response.created`,
 *   `response.output_item.added`, `response.output_text.delta`, `response.output_item.done`,
 *   `response.completed`.
 * - Gemini (`POST /v1beta/models/<m>:streamGenerateContent?alt=sse` and `:generateContent`,
 *   Gemini CLI): SSE / JSON `GenerateContentResponse`s with `finishReason: STOP`; a request for
 *   JSON (`responseMimeType: application/json`) gets a value of its `responseJsonSchema`.
 *
 * Anything else is a 404 with a JSON error, recorded, so a test can see what an agent asked for.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ModelWiresServer {
  /** `http://127.0.0.1:<port>` (no path: each agent adds its own). */
  readonly origin: string;
  /** Method and path of every request, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

const sse = (res: ServerResponse, event: string | undefined, data: unknown): void => {
  res.write(`${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`);
};

function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
}

function anthropic(res: ServerResponse, body: any, text: string): void {
  const model = typeof body?.model === 'string' ? body.model : 'claude-fake';
  const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const id = `msg_fake_${Date.now()}`;
  if (body?.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, type: 'message', role: 'assistant', model, content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage }));
    return;
  }
  startSse(res);
  sse(res, 'message_start', { type: 'message_start', message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  sse(res, 'content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
  sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
  sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
  sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } });
  sse(res, 'message_stop', { type: 'message_stop' });
  res.end();
}

function responses(res: ServerResponse, body: any, text: string): void {
  const model = typeof body?.model === 'string' ? body.model : 'gpt-fake';
  const id = `resp_fake_${Date.now()}`;
  const item = { id: `msg_${id}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
  const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };
  const response = { id, object: 'response', created_at: Math.floor(Date.now() / 1000), model, status: 'in_progress', output: [] as unknown[] };
  startSse(res);
  let seq = 0;
  const event = (type: string, data: Record<string, unknown>): void => sse(res, type, { type, sequence_number: seq++, ...data });
  event('response.created', { response });
  event('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
  event('response.content_part.added', { output_index: 0, item_id: item.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  event('response.output_text.delta', { output_index: 0, item_id: item.id, content_index: 0, delta: text });
  event('response.output_text.done', { output_index: 0, item_id: item.id, content_index: 0, text });
  event('response.content_part.done', { output_index: 0, item_id: item.id, content_index: 0, part: item.content[0] });
  event('response.output_item.done', { output_index: 0, item });
  event('response.completed', { response: { ...response, status: 'completed', output: [item], usage } });
  res.end();
}

/**
 * A value that fits a (Gemini-dialect, upper- or lower-case types) JSON schema: what a side call
 * that asks for JSON (Gemini CLI's model router asks for a complexity score) must get, or it
 * retries with backoff for over a minute.
 */
function instanceOf(schema: any): unknown {
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  switch (String(schema?.type ?? 'object').toLowerCase()) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, sub] of Object.entries(schema?.properties ?? {})) out[key] = instanceOf(sub);
      return out;
    }
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return 1;
    case 'boolean':
      return false;
    default:
      return 'fake';
  }
}

function gemini(res: ServerResponse, stream: boolean, body: any, answerText: string): void {
  const config = body?.generationConfig;
  const text = config?.responseMimeType === 'application/json' ? JSON.stringify(instanceOf(config.responseJsonSchema ?? config.responseSchema)) : answerText;
  const answer = {
    candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    modelVersion: 'gemini-fake',
  };
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
    return;
  }
  startSse(res);
  sse(res, undefined, answer);
  res.end();
}

function read(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      try {
        resolve(JSON.parse(raw));
      } catch {
        resolve(undefined);
      }
    });
  });
}

/** `answer` is what every model call says (a JSON-expecting Gemini side call gets it too). */
export async function startModelWiresServer(answer: string): Promise<ModelWiresServer> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    void read(req).then((body: any) => {
      const url = new URL(req.url ?? '/', 'http://x');
      requests.push(`${req.method} ${url.pathname}`);
      if (req.method === 'POST' && url.pathname.endsWith('/messages/count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ input_tokens: 10 }));
      } else if (req.method === 'POST' && url.pathname.endsWith('/messages')) {
        anthropic(res, body, answer);
      } else if (req.method === 'POST' && url.pathname.endsWith('/responses')) {
        responses(res, body, answer);
      } else if (req.method === 'POST' && url.pathname.includes(':streamGenerateContent')) {
        gemini(res, true, body, answer);
      } else if (req.method === 'POST' && url.pathname.includes(':generateContent')) {
        gemini(res, false, body, answer);
      } else if (req.method === 'POST' && url.pathname.includes(':countTokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ totalTokens: 10 }));
      } else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `the fake model server has no ${req.method} ${url.pathname}`, type: 'not_found_error' } }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
