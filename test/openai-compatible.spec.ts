import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../protocol/index.js';
import { ModelError, type ModelStep, type ModelStepRequest } from '../daemon/agent/model/model-adapter.js';
import {
  createOpenAICompatibleAdapter,
  parseRetryAfter,
  retryDelayMs,
  type OpenAICompatibleOptions,
} from '../daemon/agent/model/openai-compatible.js';
import { MISSING_TOOL_RESULT, chatMessagesFor, chatMessagesJsonFor, toChatMessages } from '../daemon/agent/model/chat-messages.js';
import { reasoningToSend } from '../daemon/agent/model/deepseek.js';
import { endpointFromEnv } from '../daemon/agent/model/endpoint-config.js';
import {
  chunk,
  errorResponse,
  startChatCompletionsServer,
  textResponse,
  usageOnlyChunk,
  type ChatCompletionsServer,
  type StreamStep,
} from './support/chat-completions-server.js';

let server: ChatCompletionsServer;

beforeEach(async () => {
  server = await startChatCompletionsServer();
});

afterEach(async () => {
  await server.close();
});

function adapter(extra: Partial<OpenAICompatibleOptions> = {}) {
  return createOpenAICompatibleAdapter({
    baseUrl: server.baseUrl,
    apiKey: 'test-key',
    retryBaseDelayMs: 5,
    retryMaxDelayMs: 200,
    idleTimeoutMs: 5_000,
    stepTimeoutMs: 8_000,
    ...extra,
  });
}

const userSays = (text: string): SessionEvent => ({ type: 'user/message', content: [{ type: 'text', text }] });

function request(extra: Partial<ModelStepRequest> = {}): ModelStepRequest {
  return {
    model: 'deepseek-chat',
    system: 'You are a test agent.',
    events: [userSays('hello')],
    tools: [],
    signal: new AbortController().signal,
    ...extra,
  };
}

async function expectModelError(promise: Promise<unknown>): Promise<ModelError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelError);
  return err as ModelError;
}

const T = { timeout: 10_000 };

describe('openai-compatible adapter: streaming', () => {
  it('streams text, reports each delta and sends a well-formed request', T, async () => {
    server.enqueue(textResponse(['Hel', 'lo', ' world']));
    const deltas: string[] = [];
    const step = await adapter().step(
      request({ onDelta: (d) => deltas.push(`${d.kind}:${d.text}`) }),
    );
    expect(step.text).toBe('Hello world');
    expect(step.finish).toBe('stop');
    expect(step.toolCalls).toEqual([]);
    expect(step.reasoning).toBeUndefined();
    expect(deltas).toEqual(['text:Hel', 'text:lo', 'text: world']);

    expect(server.requests).toHaveLength(1);
    const sent = server.requests[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer test-key');
    expect(sent.headers['content-type']).toBe('application/json');
    expect(sent.body.model).toBe('deepseek-chat');
    expect(sent.body.stream).toBe(true);
    expect(sent.body.stream_options).toEqual({ include_usage: true });
    expect(sent.body.tools).toBeUndefined();
    expect(sent.body.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'hello' },
    ]);
  });

  it('sends tools as function tools', T, async () => {
    server.enqueue(textResponse(['ok']));
    await adapter().step(
      request({
        tools: [{ name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
      }),
    );
    expect(server.requests[0]!.body.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'read_file',
          description: 'Read a file',
          parameters: { type: 'object', properties: { path: { type: 'string' } } },
        },
      },
    ]);
  });

  it('accumulates reasoning_content deltas separately from text', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: null, reasoning_content: '' }) },
        { data: chunk({ content: null, reasoning_content: 'Think' }) },
        { data: chunk({ content: null, reasoning_content: 'ing.' }) },
        { data: chunk({ content: 'Answer', reasoning_content: null }) },
        { data: chunk({ content: '' }, { finish_reason: 'stop' }) },
        { done: true },
      ],
    });
    const deltas: string[] = [];
    const step = await adapter().step(request({ onDelta: (d) => deltas.push(`${d.kind}:${d.text}`) }));
    expect(step.reasoning).toBe('Thinking.');
    expect(step.text).toBe('Answer');
    expect(deltas).toEqual(['reasoning:Think', 'reasoning:ing.', 'text:Answer']);
  });

  it('assembles several tool calls split across chunks in one step', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: '' }) },
        {
          data: chunk({
            tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '' } }],
          }),
        },
        { data: chunk({ tool_calls: [{ index: 0, function: { arguments: '{"pa' } }] }) },
        { data: chunk({ tool_calls: [{ index: 0, function: { arguments: 'th":"a.txt"}' } }] }) },
        {
          data: chunk({
            tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'grep', arguments: '{"q":' } }],
          }),
        },
        { data: chunk({ tool_calls: [{ index: 1, function: { arguments: '"x"}' } }] }) },
        { data: chunk({}, { finish_reason: 'tool_calls' }) },
        { done: true },
      ],
    });
    const step = await adapter().step(request());
    expect(step.finish).toBe('tool_calls');
    expect(step.text).toBe('');
    expect(step.toolCalls).toEqual([
      { id: 'call_a', name: 'read_file', arguments: '{"path":"a.txt"}' },
      { id: 'call_b', name: 'grep', arguments: '{"q":"x"}' },
    ]);
  });

  it.each([
    ['length', 'length'],
    ['content_filter', 'content_filter'],
    ['insufficient_system_resource', 'other'],
  ] as const)('maps finish_reason %s to %s', T, async (wire, expected) => {
    server.enqueue(textResponse(['partial'], { finish: wire }));
    const step = await adapter().step(request());
    expect(step.finish).toBe(expected);
    expect(step.text).toBe('partial');
  });

  it('maps DeepSeek usage (cache hit/miss, reasoning tokens) from the final chunk', T, async () => {
    server.enqueue(
      textResponse(['x'], {
        usage: {
          prompt_tokens: 120,
          completion_tokens: 30,
          total_tokens: 150,
          prompt_cache_hit_tokens: 100,
          prompt_cache_miss_tokens: 20,
          completion_tokens_details: { reasoning_tokens: 12 },
        },
      }),
    );
    const step = await adapter().step(request());
    expect(step.usage).toEqual({
      promptTokens: 120,
      completionTokens: 30,
      cacheHitTokens: 100,
      cacheMissTokens: 20,
      reasoningTokens: 12,
    });
  });

  it('maps OpenAI usage (cached_tokens) from a choices-less trailing chunk', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: 'hi' }) },
        { data: chunk({}, { finish_reason: 'stop' }) },
        {
          data: usageOnlyChunk({
            prompt_tokens: 50,
            completion_tokens: 7,
            total_tokens: 57,
            prompt_tokens_details: { cached_tokens: 32 },
            completion_tokens_details: { reasoning_tokens: 3 },
          }),
        },
        { done: true },
      ],
    });
    const step = await adapter().step(request());
    expect(step.text).toBe('hi');
    expect(step.usage).toEqual({
      promptTokens: 50,
      completionTokens: 7,
      cacheHitTokens: 32,
      cacheMissTokens: 18,
      reasoningTokens: 3,
    });
  });

  it('rejects a malformed chunk with a protocol error', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [{ data: chunk({ role: 'assistant', content: 'a' }) }, { raw: 'data: {"id": oops\n\n' }, { done: true }],
    });
    const err = await expectModelError(adapter().step(request()));
    expect(err.kind).toBe('protocol');
    expect(server.requests).toHaveLength(1);
  });

  it('rejects a stream that ends without a finish_reason', T, async () => {
    server.enqueue({ type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: 'a' }) }] });
    const err = await expectModelError(adapter().step(request()));
    expect(err.kind).toBe('protocol');
    expect(err.message).toMatch(/finish_reason/);
  });
});

describe('openai-compatible adapter: retries', () => {
  it('retries a 429 after the Retry-After delay, then succeeds', T, async () => {
    server.enqueue(errorResponse(429, 'Rate limit reached', { 'retry-after': '1' }), textResponse(['ok']));
    const started = Date.now();
    // Backoff alone would wait ~5 ms: only Retry-After explains a wait of about a second.
    const step = await adapter({ retryBaseDelayMs: 5, retryMaxDelayMs: 5_000 }).step(request());
    expect(step.text).toBe('ok');
    expect(server.requests).toHaveLength(2);
    const gap = server.requests[1]!.receivedAt - server.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('caps a long Retry-After at retryMaxDelayMs', T, async () => {
    server.enqueue(errorResponse(503, 'Server overloaded', { 'retry-after': '3600' }), textResponse(['ok']));
    const started = Date.now();
    const step = await adapter({ retryMaxDelayMs: 150 }).step(request());
    expect(step.text).toBe('ok');
    expect(server.requests).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('retries 500 twice, then succeeds', T, async () => {
    server.enqueue(errorResponse(500, 'Internal error'), errorResponse(500, 'Internal error'), textResponse(['fine']));
    const step = await adapter().step(request());
    expect(step.text).toBe('fine');
    expect(server.requests).toHaveLength(3);
    // Every attempt sends the same request.
    expect(server.requests[2]!.body).toEqual(server.requests[0]!.body);
  });

  it('gives up after maxRetries and throws the API message with the status', T, async () => {
    for (let i = 0; i < 5; i++) server.enqueue(errorResponse(502, `Bad gateway ${i}`));
    const err = await expectModelError(adapter({ maxRetries: 2 }).step(request()));
    expect(server.requests).toHaveLength(3);
    expect(err.kind).toBe('http');
    expect(err.status).toBe(502);
    expect(err.message).toBe('Bad gateway 2');
  });

  it.each([400, 401, 402, 422])('never retries %i and reports the API message', T, async (status) => {
    const apiMessage = `Error ${status}: the request was refused by the test server`;
    server.enqueue(errorResponse(status, apiMessage), textResponse(['must not be reached']));
    const err = await expectModelError(adapter().step(request()));
    expect(server.requests).toHaveLength(1);
    expect(err.kind).toBe('http');
    expect(err.status).toBe(status);
    expect(err.message).toBe(apiMessage);
  });

  it('does not retry once stream data has arrived', T, async () => {
    server.enqueue(
      { type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: 'a' }) }, { raw: 'data: not json\n\n' }] },
      textResponse(['second']),
    );
    const err = await expectModelError(adapter().step(request()));
    expect(err.kind).toBe('protocol');
    expect(server.requests).toHaveLength(1);
  });

  it('retries a refused connection and reports it as http without status', T, async () => {
    const closedUrl = server.baseUrl;
    await server.close();
    const started = Date.now();
    const err = await expectModelError(
      createOpenAICompatibleAdapter({ baseUrl: closedUrl, apiKey: 'k', maxRetries: 2, retryBaseDelayMs: 100, retryMaxDelayMs: 100 }).step(
        request(),
      ),
    );
    expect(err.kind).toBe('http');
    expect(err.status).toBeUndefined();
    // Two backoff sleeps of 50..100 ms each prove the retries happened.
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    server = await startChatCompletionsServer(); // for afterEach
  });

  it('announces each retry before its wait: attempt, delay from Retry-After, status and reason', T, async () => {
    server.enqueue(
      errorResponse(503, 'Server overloaded', { 'retry-after': '0.05' }),
      errorResponse(429, 'Rate limit reached', { 'retry-after': '0.1' }),
      textResponse(['ok']),
    );
    const retries: Array<Parameters<NonNullable<ModelStepRequest['onRetry']>>[0] & { requestsSoFar: number }> = [];
    const step = await adapter().step(request({ onRetry: (retry) => void retries.push({ ...retry, requestsSoFar: server.requests.length }) }));
    expect(step.text).toBe('ok');
    expect(retries).toEqual([
      { attempt: 2, delayMs: 50, status: 503, reason: 'HTTP 503: Server overloaded', requestsSoFar: 1 },
      { attempt: 3, delayMs: 100, status: 429, reason: 'HTTP 429: Rate limit reached', requestsSoFar: 2 },
    ]);
  });

  it('announces a refused connection without a status, and never a failure it does not retry', T, async () => {
    server.enqueue(errorResponse(400, 'Bad request'));
    const none: unknown[] = [];
    await expectModelError(adapter().step(request({ onRetry: (retry) => void none.push(retry) })));
    expect(none).toEqual([]);
    const closedUrl = server.baseUrl;
    await server.close();
    const retries: Array<{ attempt: number; status?: number; reason: string }> = [];
    await expectModelError(
      createOpenAICompatibleAdapter({ baseUrl: closedUrl, apiKey: 'k', maxRetries: 1, retryBaseDelayMs: 10, retryMaxDelayMs: 10 }).step(
        request({ onRetry: (retry) => void retries.push(retry) }),
      ),
    );
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ attempt: 2 });
    expect(retries[0]!.status).toBeUndefined();
    expect(retries[0]!.reason).toContain(`cannot reach ${closedUrl}`);
    server = await startChatCompletionsServer(); // for afterEach
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-12-01T10:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2_000);
    expect(parseRetryAfter('0.5', now)).toBe(500);
    expect(parseRetryAfter('Tue, 01 Dec 2026 10:00:07 GMT', now)).toBe(7_000);
    expect(parseRetryAfter('Tue, 01 Dec 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('backs off exponentially with jitter, capped', () => {
    expect(retryDelayMs(0, undefined, 100, 10_000, () => 1)).toBe(100);
    expect(retryDelayMs(0, undefined, 100, 10_000, () => 0)).toBe(50);
    expect(retryDelayMs(3, undefined, 100, 10_000, () => 1)).toBe(800);
    expect(retryDelayMs(20, undefined, 100, 10_000, () => 1)).toBe(10_000);
    expect(retryDelayMs(0, 60_000, 100, 10_000)).toBe(10_000);
    expect(retryDelayMs(0, 250, 100, 10_000)).toBe(250);
  });
});

describe('openai-compatible adapter: watchdogs and abort', () => {
  it('fires idle-timeout on a stream that sends only keep-alive comments', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { repeat: { comment: 'keep-alive' }, everyMs: 40 }],
    });
    const started = Date.now();
    const err = await expectModelError(adapter({ idleTimeoutMs: 300 }).step(request()));
    const elapsed = Date.now() - started;
    expect(err.kind).toBe('idle-timeout');
    expect(err.message).toContain('idleTimeoutMs=300');
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2_000);
    const sent = server.requests[0]!;
    // Comments kept arriving while the idle timer ran out: they did not reset it.
    expect(sent.commentsSent).toBeGreaterThanOrEqual(4);
    // The adapter hung up on the server.
    await expect(sent.closed).resolves.toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it('does not fire idle-timeout while real data keeps arriving', T, async () => {
    const steps: StreamStep[] = [{ data: chunk({ role: 'assistant', content: '' }) }];
    for (let i = 0; i < 8; i++) steps.push({ wait: 150 }, { data: chunk({ content: `${i}` }) });
    steps.push({ data: chunk({}, { finish_reason: 'stop' }) }, { done: true });
    server.enqueue({ type: 'stream', steps });
    const started = Date.now();
    const step = await adapter({ idleTimeoutMs: 400 }).step(request());
    expect(step.text).toBe('01234567');
    // Longer than the idle timeout in total: the timer was re-armed by each chunk.
    expect(Date.now() - started).toBeGreaterThan(1_000);
  });

  it('fires idle-timeout when the server never sends headers', T, async () => {
    // A stream script that waits before writing anything still sends headers first, so use an
    // HTTP server that accepts the request and stays silent.
    const { createServer } = await import('node:http');
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const port = (silent.address() as { port: number }).port;
      const err = await expectModelError(
        createOpenAICompatibleAdapter({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'k', idleTimeoutMs: 250 }).step(request()),
      );
      expect(err.kind).toBe('idle-timeout');
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('fires step-timeout on a stream that trickles data forever', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [{ repeat: { data: chunk({ content: '.' }) }, everyMs: 30 }],
    });
    const started = Date.now();
    const err = await expectModelError(adapter({ idleTimeoutMs: 300, stepTimeoutMs: 600 }).step(request()));
    const elapsed = Date.now() - started;
    expect(err.kind).toBe('step-timeout');
    expect(err.message).toContain('stepTimeoutMs=600');
    expect(elapsed).toBeGreaterThanOrEqual(590);
    expect(elapsed).toBeLessThan(2_500);
    expect(server.requests[0]!.dataSent).toBeGreaterThan(5);
    await expect(server.requests[0]!.closed).resolves.toBe(true);
  });

  it('step-timeout also bounds retry backoff', T, async () => {
    server.enqueue(errorResponse(429, 'slow down', { 'retry-after': '30' }), textResponse(['late']));
    const started = Date.now();
    const err = await expectModelError(adapter({ retryMaxDelayMs: 30_000, stepTimeoutMs: 400 }).step(request()));
    expect(err.kind).toBe('step-timeout');
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(server.requests).toHaveLength(1);
  });

  it('aborts mid-stream through the caller signal', T, async () => {
    server.enqueue({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: 'first' }) },
        { repeat: { data: chunk({ content: '' }) }, everyMs: 50 },
      ],
    });
    const caller = new AbortController();
    let abortedAt = 0;
    const started = Date.now();
    const err = await expectModelError(
      adapter().step(
        request({
          signal: caller.signal,
          onDelta: () => {
            abortedAt = Date.now();
            caller.abort();
          },
        }),
      ),
    );
    expect(err.kind).toBe('aborted');
    expect(abortedAt).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect(server.requests[0]!.closed).resolves.toBe(true);
  });

  it('aborts while waiting to retry', T, async () => {
    server.enqueue(errorResponse(429, 'wait', { 'retry-after': '5' }));
    const caller = new AbortController();
    setTimeout(() => caller.abort(), 150);
    const started = Date.now();
    const err = await expectModelError(adapter({ retryMaxDelayMs: 5_000 }).step(request({ signal: caller.signal })));
    expect(err.kind).toBe('aborted');
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(server.requests).toHaveLength(1);
  });

  it('rejects an already-aborted signal without sending anything', T, async () => {
    const caller = new AbortController();
    caller.abort();
    const err = await expectModelError(adapter().step(request({ signal: caller.signal })));
    expect(err.kind).toBe('aborted');
    expect(server.requests).toHaveLength(0);
  });

  it('leaves no listener on the caller signal after a step', T, async () => {
    server.enqueue(textResponse(['a']), errorResponse(400, 'bad'));
    const caller = new AbortController();
    let added = 0;
    let removed = 0;
    const signal = caller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    }) as typeof add;
    signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      removed++;
      remove(...args);
    }) as typeof remove;
    await adapter().step(request({ signal }));
    await expectModelError(adapter().step(request({ signal })));
    expect(added).toBeGreaterThanOrEqual(2);
    expect(removed).toBe(added);
  });
});

describe('openai-compatible adapter: messages sent', () => {
  async function toolStep(model: string): Promise<ModelStep> {
    server.enqueue({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: null, reasoning_content: 'I should read it.' }) },
        {
          data: chunk({
            content: null,
            tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } }],
          }),
        },
        { data: chunk({}, { finish_reason: 'tool_calls' }) },
        { done: true },
      ],
    });
    return adapter().step(request({ model }));
  }

  function followUp(first: ModelStep): SessionEvent[] {
    return [
      userSays('read a'),
      {
        type: 'assistant/message',
        content: first.text === '' ? [] : [{ type: 'text', text: first.text }],
        ...(first.reasoning !== undefined ? { reasoning: first.reasoning } : {}),
        toolCalls: [...first.toolCalls],
      },
      { type: 'tool/result', callId: 'call_1', name: 'read_file', content: [{ type: 'text', text: 'A' }], isError: false },
      { type: 'usage', usage: { promptTokens: 1, completionTokens: 1, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 } },
    ];
  }

  it('sends reasoning_content back on a tool-calling assistant message (deepseek-chat)', T, async () => {
    const first = await toolStep('deepseek-chat');
    expect(first.reasoning).toBe('I should read it.');
    server.enqueue(textResponse(['done']));
    await adapter().step(request({ model: 'deepseek-chat', events: followUp(first) }));
    const messages = server.requests[1]!.body.messages;
    expect(messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'read a' },
      {
        role: 'assistant',
        content: '',
        reasoning_content: 'I should read it.',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'A' },
    ]);
  });

  it('never sends reasoning_content to deepseek-reasoner', T, async () => {
    const first = await toolStep('deepseek-reasoner');
    expect(first.reasoning).toBe('I should read it.');
    server.enqueue(textResponse(['done']));
    await adapter().step(request({ model: 'deepseek-reasoner', events: followUp(first) }));
    const body = server.requests[1]!.body;
    expect(body.model).toBe('deepseek-reasoner');
    const assistant = body.messages[2];
    expect(assistant.role).toBe('assistant');
    expect(assistant.tool_calls).toHaveLength(1);
    expect('reasoning_content' in assistant).toBe(false);
  });

  it('sends a tool-call-only assistant turn with content "" (not null)', T, async () => {
    server.enqueue(textResponse(['ok']));
    await adapter().step(
      request({
        events: [
          userSays('go'),
          { type: 'assistant/message', content: [], toolCalls: [{ id: 'c1', name: 'ls', arguments: '{}' }] },
          { type: 'tool/result', callId: 'c1', name: 'ls', content: [{ type: 'text', text: 'x' }], isError: false },
        ],
      }),
    );
    const assistant = server.requests[0]!.body.messages[2];
    expect(assistant.role).toBe('assistant');
    expect(assistant.content).toBe('');
    expect(assistant.tool_calls[0].id).toBe('c1');
  });

  it('sends images as image_url parts with data URLs', T, async () => {
    server.enqueue(textResponse(['a cat']));
    await adapter().step(
      request({
        events: [
          {
            type: 'user/message',
            content: [
              { type: 'text', text: 'what is this?' },
              { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
            ],
          },
        ],
      }),
    );
    expect(server.requests[0]!.body.messages[1]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,aGVsbG8=' } },
      ],
    });
  });
});

describe('toChatMessages', () => {
  it('maps steering to user and skips usage and turn/end', () => {
    const messages = toChatMessages('deepseek-chat', 'sys', [
      userSays('a'),
      { type: 'assistant/message', content: [{ type: 'text', text: 'b1' }, { type: 'text', text: 'b2' }], reasoning: 'r' },
      { type: 'usage', usage: { promptTokens: 1, completionTokens: 1, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 } },
      { type: 'turn/end', reason: 'completed' },
      { type: 'steering/message', content: [{ type: 'text', text: 'c' }] },
    ]);
    expect(messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'a' },
      // No tool calls: reasoning is optional and left out.
      { role: 'assistant', content: 'b1\nb2' },
      { role: 'user', content: 'c' },
    ]);
  });

  it('keeps tool results next to their calls and fills in missing ones', () => {
    const messages = toChatMessages('deepseek-chat', '', [
      userSays('go'),
      {
        type: 'assistant/message',
        content: [],
        toolCalls: [
          { id: 'a', name: 't', arguments: '{}' },
          { id: 'b', name: 't', arguments: '' },
        ],
      },
      { type: 'tool/result', callId: 'a', name: 't', content: [{ type: 'text', text: 'A' }], isError: false },
      { type: 'steering/message', content: [{ type: 'text', text: 'hurry' }] },
      { type: 'tool/result', callId: 'zzz', name: 't', content: [{ type: 'text', text: 'orphan' }], isError: false },
    ]);
    expect(messages).toEqual([
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'a', type: 'function', function: { name: 't', arguments: '{}' } },
          { id: 'b', type: 'function', function: { name: 't', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'a', content: 'A' },
      { role: 'tool', tool_call_id: 'b', content: MISSING_TOOL_RESULT },
      { role: 'user', content: 'hurry' },
    ]);
  });

  it('extends a growing log incrementally, equal at every step to converting it from scratch', () => {
    const log: SessionEvent[] = [];
    const full: SessionEvent[] = [
      userSays('go'),
      { type: 'assistant/message', content: [], reasoning: 'think', toolCalls: [{ id: 'a', name: 't', arguments: '{}' }, { id: 'b', name: 't', arguments: '{}' }] },
      { type: 'tool/result', callId: 'a', name: 't', content: [{ type: 'text', text: 'A' }], isError: false },
      { type: 'steering/message', content: [{ type: 'text', text: 'hurry' }] },
      { type: 'tool/result', callId: 'b', name: 't', content: [{ type: 'text', text: 'B' }], isError: true },
      { type: 'assistant/message', content: [], toolCalls: [{ id: 'c', name: 't', arguments: '{}' }] },
      { type: 'assistant/message', content: [{ type: 'text', text: 'gave up on c' }] },
      { type: 'turn/end', reason: 'completed' },
    ];
    for (const event of full) {
      log.push(event);
      expect(chatMessagesFor('deepseek-reasoner', 'sys', log)).toEqual(toChatMessages('deepseek-reasoner', 'sys', log));
      // The kept JSON text (what the adapter sends) is exactly the messages' JSON, placeholders included.
      expect(chatMessagesJsonFor('deepseek-reasoner', 'sys', log)).toBe(JSON.stringify(toChatMessages('deepseek-reasoner', 'sys', log)));
    }
    // The pending call "b" was answered later: the placeholder sent meanwhile is not kept.
    expect(chatMessagesFor('deepseek-reasoner', 'sys', log).filter((m) => m.role === 'tool' && m.tool_call_id === 'b')).toEqual([
      { role: 'tool', tool_call_id: 'b', content: 'B' },
    ]);
  });

  it('rebuilds when the log was changed other than by appending, or the model changed', () => {
    const log: SessionEvent[] = [userSays('one'), userSays('two')];
    chatMessagesFor('m', '', log);
    chatMessagesJsonFor('m', '', log);
    log[1] = userSays('replaced');
    expect(chatMessagesFor('m', '', log)).toEqual([{ role: 'user', content: 'one' }, { role: 'user', content: 'replaced' }]);
    expect(JSON.parse(chatMessagesJsonFor('m', '', log))).toEqual([{ role: 'user', content: 'one' }, { role: 'user', content: 'replaced' }]);
    log.splice(1, 1);
    expect(chatMessagesFor('m', '', log)).toEqual([{ role: 'user', content: 'one' }]);
    expect(chatMessagesFor('m', 'new system', log)[0]).toEqual({ role: 'system', content: 'new system' });
  });

  it('reasoningToSend follows the DeepSeek rule', () => {
    const withTools = {
      type: 'assistant/message' as const,
      content: [],
      reasoning: 'why',
      toolCalls: [{ id: 'x', name: 'n', arguments: '{}' }],
    };
    expect(reasoningToSend('deepseek-chat', withTools)).toBe('why');
    expect(reasoningToSend('deepseek-reasoner', withTools)).toBeUndefined();
    expect(reasoningToSend('deepseek/deepseek-reasoner', withTools)).toBeUndefined();
    expect(reasoningToSend('deepseek-chat', { ...withTools, toolCalls: [] })).toBeUndefined();
    expect(reasoningToSend('deepseek-chat', { type: 'assistant/message', content: [], toolCalls: withTools.toolCalls })).toBeUndefined();
  });
});

describe('endpointFromEnv', () => {
  it('returns undefined when nothing is configured', () => {
    expect(endpointFromEnv({})).toBeUndefined();
    expect(endpointFromEnv({ DEEPSEEK_API_KEY: '  ' })).toBeUndefined();
    // An OpenAI key alone does not pick api.openai.com.
    expect(endpointFromEnv({ OPENAI_API_KEY: 'sk-x' })).toBeUndefined();
  });

  it('uses DeepSeek defaults for DEEPSEEK_API_KEY', () => {
    expect(endpointFromEnv({ DEEPSEEK_API_KEY: 'ds-key' })).toEqual({
      baseUrl: 'https://api.deepseek.com',
      apiKey: 'ds-key',
      model: 'deepseek-chat',
    });
    expect(endpointFromEnv({ DEEPSEEK_API_KEY: 'ds-key', SUBAGENTD_MODEL: 'deepseek-reasoner' })?.model).toBe(
      'deepseek-reasoner',
    );
  });

  it('uses OPENAI_BASE_URL + OPENAI_API_KEY for any compatible server', () => {
    expect(
      endpointFromEnv({ OPENAI_BASE_URL: 'http://localhost:8000/v1', OPENAI_API_KEY: 'local', SUBAGENTD_MODEL: 'qwen3' }),
    ).toEqual({ baseUrl: 'http://localhost:8000/v1', apiKey: 'local', model: 'qwen3' });
    // The explicit base URL wins over a DeepSeek key.
    expect(
      endpointFromEnv({
        OPENAI_BASE_URL: 'http://localhost:8000/v1',
        OPENAI_API_KEY: 'local',
        SUBAGENTD_MODEL: 'qwen3',
        DEEPSEEK_API_KEY: 'ds',
      })?.baseUrl,
    ).toBe('http://localhost:8000/v1');
  });

  it('applies overrides before the environment', () => {
    expect(
      endpointFromEnv(
        { DEEPSEEK_API_KEY: 'ds', SUBAGENTD_MODEL: 'deepseek-chat' },
        { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'o-key', model: 'o-model' },
      ),
    ).toEqual({ baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'o-key', model: 'o-model' });
    expect(endpointFromEnv({}, { apiKey: 'ds2' })).toEqual({
      baseUrl: 'https://api.deepseek.com',
      apiKey: 'ds2',
      model: 'deepseek-chat',
    });
  });

  it('throws a config error for a half-configured endpoint and never leaks a DeepSeek key', () => {
    const config = (fn: () => unknown): ModelError => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(ModelError);
        expect((e as ModelError).kind).toBe('config');
        return e as ModelError;
      }
      throw new Error('expected a config error');
    };
    config(() => endpointFromEnv({ OPENAI_BASE_URL: 'http://localhost:8000/v1', SUBAGENTD_MODEL: 'm' }));
    config(() => endpointFromEnv({ OPENAI_BASE_URL: 'http://localhost:8000/v1', OPENAI_API_KEY: 'k' }));
    config(() => endpointFromEnv({ OPENAI_BASE_URL: 'not a url', OPENAI_API_KEY: 'k', SUBAGENTD_MODEL: 'm' }));
    config(() => endpointFromEnv({ OPENAI_BASE_URL: 'ftp://x/v1', OPENAI_API_KEY: 'k', SUBAGENTD_MODEL: 'm' }));
    config(() =>
      endpointFromEnv({ OPENAI_BASE_URL: 'http://localhost:8000/v1', DEEPSEEK_API_KEY: 'ds', SUBAGENTD_MODEL: 'm' }),
    );
    // DeepSeek's own host may use the DeepSeek key and default model.
    expect(endpointFromEnv({ OPENAI_BASE_URL: 'https://api.deepseek.com/v1', DEEPSEEK_API_KEY: 'ds' })).toEqual({
      baseUrl: 'https://api.deepseek.com/v1',
      apiKey: 'ds',
      model: 'deepseek-chat',
    });
  });
});
