/**
 * One limit for the whole pool: three cluster members (real daemons on a real nats-server) whose
 * config gives the model endpoint `maxConcurrent: 2` share it through leased permits in JetStream
 * KV, so the chat-completions server never streams more than 2 responses at once, however the
 * pool spreads 12 children over its members.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-cluster-');
const LIMIT = 2;

it('three members with one shared endpoint limit: the server never streams more than the limit at once', async () => {
  server = await startChatCompletionsServer({
    fallback: () => ({
      type: 'stream',
      steps: [
        { data: chunk({ role: 'assistant', content: '' }) },
        { wait: 400 },
        { data: chunk({ content: 'done' }, { finish_reason: 'stop' }) },
        { done: true },
      ],
    }),
  });
  const config = {
    model: { baseUrl: server.baseUrl, apiKeyEnv: 'CLUSTER_TEST_KEY', default: 'test-model' },
    limits: { maxConcurrentRuns: 12, maxRunsPerConnection: 12 },
    endpoints: { '*': { maxConcurrent: LIMIT } },
  };
  // 4 slots each: the 12 children run on all three members at once.
  const members = [];
  for (let i = 0; i < 3; i++) members.push(await scene.member(config, { slots: 4, ackWaitMs: 5_000 }, { env: { CLUSTER_TEST_KEY: 'k' } }));
  const services = await Promise.all(members.map((m) => scene.clients.connect(m.socket)));
  const runs = await Promise.all(
    Array.from({ length: 12 }, async (_, i) =>
      (await services[i % 3]!.start('spawn', {
        prompt: [{ type: 'text', text: `task ${i}` }],
        parent: { sessionId: 'upstream-cluster', cwd: process.cwd() },
        signal: AbortSignal.timeout(90_000),
      })) as RemoteSubagentRun,
    ),
  );
  const results = await Promise.all(runs.map((run) => run.result));
  expect(results.map((r) => r.stopReason)).toEqual(Array(12).fill('completed'));
  expect(server.load.streamed).toBe(12);
  expect(server.load.peak).toBeLessThanOrEqual(LIMIT);
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
}, 120_000);
