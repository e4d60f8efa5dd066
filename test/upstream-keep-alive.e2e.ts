/**
 * A provider that queues requests the way DeepSeek documents: it holds each one open, sending SSE
 * `: keep-alive` comments for 90 s before the first chunk. The children's idle limit is far
 * shorter (20 s); they still complete, each having shown `model-wait`. (The one long test of the
 * upstream work: the issue asks for this wait.)
 */
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSubagentRun, RunEvent } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ChatCompletionsServer } from './support/chat-completions-server.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';

const HELD_MS = 90_000;
let server: ChatCompletionsServer;
let daemon: DaemonProcess;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  server = await startChatCompletionsServer({
    fallback: () => ({
      type: 'stream',
      steps: [
        { repeat: { comment: 'keep-alive' }, everyMs: 5_000, forMs: HELD_MS },
        { data: chunk({ role: 'assistant', content: 'served after the queue' }) },
        { data: chunk({}, { finish_reason: 'stop' }) },
        { done: true },
      ],
    }),
  });
  daemon = await startE2eDaemon(
    { model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', idleTimeoutMs: 20_000, maxRetries: 0 }, detachGraceMs: 0 },
    { TEST_KEY: 'sk-keep-alive' },
  );
});

afterAll(async () => {
  await runs.disposeAll();
  await clients.closeAll();
  await daemon?.stop();
  await server?.close();
});

describe('a provider holding requests with keep-alive comments', () => {
  it('children wait 90 s for their first chunk, show model-wait, and complete', async () => {
    const service = await clients.connect(daemon.socket);
    const started = await Promise.all(
      Array.from({ length: 3 }, async (_, i) => {
        const events: RunEvent[] = [];
        const run = runs.track(
          (await service.start('spawn', {
            prompt: [{ type: 'text', text: `queued task ${i}` }],
            parent: { sessionId: 'keep-alive-parent', cwd: tmpdir() },
            signal: new AbortController().signal,
            onEvent: (event) => void events.push(event),
          })) as RemoteSubagentRun,
        );
        return { run, events };
      }),
    );
    const results = await Promise.all(started.map(({ run }) => run.result));
    expect(results.map((r) => [r.stopReason, r.output])).toEqual(Array(3).fill(['completed', [{ type: 'text', text: 'served after the queue' }]]));
    for (const { events } of started) {
      expect(events).toContainEqual({ kind: 'model-wait', endpoint: server.baseUrl, position: 0 });
      expect(events.some((e) => e.kind === 'retry')).toBe(false);
    }
    // One request each, held the whole time: no retry, no idle failure.
    expect(server.requests).toHaveLength(3);
    for (const request of server.requests) expect(request.commentsSent).toBeGreaterThanOrEqual(HELD_MS / 5_000 - 1);
  }, 180_000);
});
