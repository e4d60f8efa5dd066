/**
 * `tokensPerMinute` holds for the pool (limit-state.ts in the endpoint's JetStream KV key): three
 * real members on a real nats-server share a budget of 600 tokens a minute against one real
 * chat-completions server whose every answer reports 200 tokens of usage. Each member alone would
 * send all its children at once (its own budget is unused); together they send 3 (one probe, then
 * two reserving the usage it showed), and the other 3 only once the first have left the sliding
 * window, so no 60 s at the server holds more than 600 tokens.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { startChatCompletionsServer, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { busiestWindow, endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-tpm-');
const TOKENS = 200;
const BUDGET = 600;

it('three members share tokensPerMinute: the server never gets more than the budget in any 60 s', async () => {
  server = await startChatCompletionsServer({ fallback: () => usageAnswer(300, TOKENS) });
  const config = {
    model: { baseUrl: server.baseUrl, apiKeyEnv: 'TPM_TEST_KEY', default: 'test-model' },
    endpoints: { '*': { tokensPerMinute: BUDGET } },
  };
  const members = [];
  // Two slots each: six children run on three members at once, two per member.
  for (let i = 0; i < 3; i++) members.push(await scene.member(config, { slots: 2, ackWaitMs: 5_000 }, { env: { TPM_TEST_KEY: 'k' } }));
  const services = await Promise.all(members.map((m) => scene.clients.connect(m.socket)));
  const runs: RemoteSubagentRun[] = await Promise.all(
    Array.from({ length: 6 }, (_, i) => startChild(services[i % 3]!, `tpm-${i}`, AbortSignal.timeout(120_000))),
  );
  // The budget is spent by three: the other three wait for the pool while those are in the window.
  for (let tries = 0; ; tries++) {
    const statuses = await endpointStatuses(services);
    const waiting = statuses.reduce((n, e) => n + e.waiting, 0);
    if (server.requests.length >= 3 && server.requests.every((r) => r.dataSent > 0) && waiting === 3) break;
    if (tries > 600) throw new Error(`three requests never filled the budget (${server.requests.length} sent, ${waiting} waiting)`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(server.requests).toHaveLength(3);
  const results = await Promise.all(runs.map((run) => run.result));
  expect(results.map((r) => r.stopReason)).toEqual(Array(6).fill('completed'));
  expect(server.requests).toHaveLength(6);
  // Every answer is 200 tokens: at most 3 requests in any 60 s.
  expect(busiestWindow(server).count * TOKENS).toBeLessThanOrEqual(BUDGET);
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
}, 180_000);
