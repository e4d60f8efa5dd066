/**
 * The adaptive limit holds for the pool (limit-state.ts in the endpoint's JetStream KV key): three
 * real members on a real nats-server, one real chat-completions server that streams at most 2
 * responses at once and answers 429 with `Retry-After` beyond that.
 * - A 429 storm on one member (the others not even started yet) cuts the pool's limit to 2.
 * - Afterwards all three members, 12 children between them, never have more than 2 requests at
 *   the server at once, and every member's status shows the pool's limit of 2.
 * - Once the cut's one-minute ceiling has passed and the provider serves more, successes probe
 *   the pool's limit back up.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService } from '../client/index.js';
import { startChatCompletionsServer, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-adaptive-');
const CEILING_HOLD_MS = 60_000;

async function wave(services: readonly RemoteSubagentService[], name: string, count: number): Promise<void> {
  const runs: RemoteSubagentRun[] = await Promise.all(
    Array.from({ length: count }, (_, i) => startChild(services[i % services.length]!, `${name}-${i}`, AbortSignal.timeout(90_000))),
  );
  const results = await Promise.all(runs.map((run) => run.result));
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
  expect(results.map((r) => r.stopReason)).toEqual(Array(count).fill('completed'));
}

it('a 429 storm on one member cuts the pool\'s limit; no member exceeds it afterwards; successes probe it back up', async () => {
  const cap = { max: 2, retryAfter: '1' };
  server = await startChatCompletionsServer({ fallback: () => usageAnswer(700, 10), streamLimit: cap });
  const config = {
    model: { baseUrl: server.baseUrl, apiKeyEnv: 'ADAPTIVE_TEST_KEY', default: 'test-model' },
    limits: { maxConcurrentRuns: 16, maxRunsPerConnection: 16 },
  };
  const member = (): ReturnType<typeof scene.member> => scene.member(config, { slots: 4, ackWaitMs: 5_000 }, { env: { ADAPTIVE_TEST_KEY: 'k' } });

  // The storm: one member alone, 8 children, the pool's limit starting at 4 against a cap of 2.
  const first = await scene.clients.connect((await member()).socket);
  await wave([first], 'storm', 8);
  expect(server.load.refused).toBeGreaterThan(0);
  const cutSeen = Date.now();
  expect((await endpointStatuses([first])).map((e) => e.limit)).toEqual([2]);

  // Two more members join; 12 children over all three.
  const others = [await scene.clients.connect((await member()).socket), await scene.clients.connect((await member()).socket)];
  const all = [first, ...others];
  const refused = server.load.refused;
  server.load.openPeak = server.load.open;
  await wave(all, 'after', 12);
  expect(server.load.openPeak).toBeLessThanOrEqual(2);
  expect(server.load.refused).toBe(refused);
  const limits = (await endpointStatuses(all)).map((e) => e.limit);
  expect(limits).toHaveLength(3);
  for (const limit of limits) expect(limit).toBeLessThanOrEqual(2);

  // The provider serves 6 now; past the cut's ceiling, successes raise the pool's limit.
  cap.max = 6;
  const until = cutSeen + CEILING_HOLD_MS + 1_000;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())));
  server.load.openPeak = server.load.open;
  await wave(all, 'probe', 12);
  expect(server.load.openPeak).toBeGreaterThan(2);
  const grown = (await endpointStatuses(all)).map((e) => e.limit);
  expect(Math.max(...grown)).toBeGreaterThan(2);
}, 200_000);
