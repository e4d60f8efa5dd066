/**
 * The openai-compatible adapter behind its endpoint's governor, against the real wire: keep-alive
 * comments before the first chunk are waiting (not idleness) and are reported; the first-byte
 * limit bounds that wait; a push-back pauses the endpoint without using up the step's retries;
 * the step's ceiling does not count the wait for a permit; a cancel ends a wait.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ModelWaitEvent, RetryEvent, SessionEvent } from '../protocol/index.js';
import { ModelError, type ModelStepRequest } from '../daemon/agent/model/model-adapter.js';
import { createOpenAICompatibleAdapter, type OpenAICompatibleOptions } from '../daemon/agent/model/openai-compatible.js';
import { EndpointGovernor } from '../daemon/upstream/governor.js';
import { chunk, errorResponse, startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';

let server: ChatCompletionsServer;
beforeEach(async () => {
  server = await startChatCompletionsServer();
});
afterEach(async () => {
  await server.close();
});

const userSays = (text: string): SessionEvent => ({ type: 'user/message', content: [{ type: 'text', text }] });

function adapter(governor: EndpointGovernor, extra: Partial<OpenAICompatibleOptions> = {}) {
  return createOpenAICompatibleAdapter({ baseUrl: server.baseUrl, apiKey: 'k', retryBaseDelayMs: 5, retryMaxDelayMs: 2_000, idleTimeoutMs: 5_000, governor, ...extra });
}

function request(extra: Partial<ModelStepRequest> = {}): ModelStepRequest {
  return { model: 'm', system: 's', events: [userSays('hi')], tools: [], signal: new AbortController().signal, ...extra };
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

describe('the adapter behind its endpoint governor', () => {
  it('keep-alive comments before the first chunk are a wait, not idleness, and are reported as model-wait', async () => {
    server.enqueue({
      type: 'stream',
      steps: [
        { repeat: { comment: 'keep-alive' }, everyMs: 100, forMs: 1_200 },
        { data: chunk({ role: 'assistant', content: 'at last' }) },
        { data: chunk({}, { finish_reason: 'stop' }) },
        { done: true },
      ],
    });
    const waits: Array<Omit<ModelWaitEvent, 'kind'>> = [];
    const step = await adapter(new EndpointGovernor(server.baseUrl), { idleTimeoutMs: 400 }).step(request({ onWait: (w) => waits.push(w) }));
    expect(step.text).toBe('at last');
    // Longer than the idle limit in all, yet not idle: the comments kept it alive.
    expect(server.requests[0]!.commentsSent).toBeGreaterThan(5);
    expect(waits[0]).toEqual({ endpoint: server.baseUrl, position: 0 });
  });

  it('the first-byte limit bounds a wait at the provider', async () => {
    server.enqueue({ type: 'stream', steps: [{ repeat: { comment: 'keep-alive' }, everyMs: 50, forMs: 5_000 }] });
    const error = await failure(adapter(new EndpointGovernor(server.baseUrl, { firstByteTimeoutMs: 400 }), { idleTimeoutMs: 300 }).step(request()));
    expect(error.message).toContain('firstByteTimeoutMs=400');
  });

  it('a 429 pauses the endpoint and is retried without using up the step\'s retries', async () => {
    server.enqueue(
      errorResponse(429, 'slow down', { 'retry-after': '0' }),
      errorResponse(503, 'overloaded', { 'retry-after': '0' }),
      errorResponse(429, 'slow down', { 'retry-after': '0' }),
      textResponse(['fine']),
    );
    const governor = new EndpointGovernor(server.baseUrl);
    const retries: Array<Omit<RetryEvent, 'kind'>> = [];
    const step = await adapter(governor, { maxRetries: 0 }).step(request({ onRetry: (r) => retries.push(r) }));
    expect(step.text).toBe('fine');
    expect(retries.map((r) => [r.attempt, r.status])).toEqual([
      [2, 429],
      [3, 503],
      [4, 429],
    ]);
    expect(governor.status().throttledLastMinute).toBe(3);
  });

  it('waiting for a permit counts against neither the step ceiling nor the idle limit, and a cancel ends it', async () => {
    const governor = new EndpointGovernor(server.baseUrl, { maxConcurrent: 1 });
    const held = await governor.acquire({ client: 'other', lineage: 'other' }, new AbortController().signal);
    server.enqueue(textResponse(['after the wait']));
    const waits: Array<Omit<ModelWaitEvent, 'kind'>> = [];
    const stepping = adapter(governor, { stepTimeoutMs: 300, idleTimeoutMs: 200 }).step(request({ onWait: (w) => waits.push(w) }));
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(waits).toEqual([{ endpoint: server.baseUrl, position: 1 }]);
    expect(server.requests).toHaveLength(0);
    held.release({ kind: 'ok' });
    expect((await stepping).text).toBe('after the wait');

    const again = await governor.acquire({ client: 'other', lineage: 'other' }, new AbortController().signal);
    const controller = new AbortController();
    const cancelled = adapter(governor).step(request({ signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    expect((await failure(cancelled)).kind).toBe('aborted');
    expect(governor.status().waiting).toBe(0);
    again.release({ kind: 'ok' });
  });
});
