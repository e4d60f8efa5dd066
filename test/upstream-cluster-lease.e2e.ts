/**
 * A member that dies holding an endpoint's permits does not hold the pool's limit for long: each
 * permit in the endpoint's KV key is a lease its member renews while the request lives
 * (kv-shared-limit.ts): a request held longer than the lease keeps its permit, and once the
 * member is killed (SIGKILL: no release is written) its permits lapse and another member's waiting
 * request goes. Real members, a real nats-server, a real
 * chat-completions server.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-lease-');
/** kv-shared-limit.ts's LEASE_MS. */
const LEASE_MS = 30_000;

async function waitUntil(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let tries = 0; !(await check()); tries++) {
    if (tries > 1200) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

it("a killed member's permits lapse: the pool's limit is not held by the dead", async () => {
  // The first two requests stream until their client goes away; every other one is answered at once.
  const held = (): ScriptedResponse => ({ type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { gate: new Promise(() => undefined) }] });
  server = await startChatCompletionsServer({ fallback: () => usageAnswer(50, 10) });
  server.enqueue(held, held);
  const served = server;
  const config = {
    model: { baseUrl: server.baseUrl, apiKeyEnv: 'LEASE_TEST_KEY', default: 'test-model' },
    endpoints: { '*': { maxConcurrent: 2 } },
  };
  const member = (): ReturnType<typeof scene.member> => scene.member(config, { slots: 2, ackWaitMs: 5_000 }, { env: { LEASE_TEST_KEY: 'k' } });

  // The first member takes both of the pool's permits and holds them.
  const doomed = await member();
  const first = await scene.clients.connect(doomed.socket);
  const holders = await Promise.all([0, 1].map((i) => startChild(first, `held-${i}`, AbortSignal.timeout(120_000))));
  await waitUntil(() => served.requests.length === 2, 'the two held requests at the server');

  // The second member's child waits for the pool (the first member's slots are full, so it runs here).
  const survivor = await scene.clients.connect((await member()).socket);
  const waiting: RemoteSubagentRun = await startChild(survivor, 'after', AbortSignal.timeout(120_000));
  await waitUntil(async () => (await endpointStatuses([survivor])).some((e) => e.waiting === 1), 'the survivor waiting for the pool');
  // A live request keeps its permit past the lease's length (its member renews it): still nothing for the survivor.
  const heldSince = served.requests[1]!.receivedAt;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, heldSince + LEASE_MS + 10_000 - Date.now())));
  expect(served.requests).toHaveLength(2);
  expect((await endpointStatuses([survivor])).map((e) => e.waiting)).toEqual([1]);

  doomed.proc.kill('SIGKILL');
  const result = await waiting.result;
  expect(result.stopReason).toBe('completed');
  expect(served.requests.length).toBeGreaterThanOrEqual(3);
  await waiting.dispose().catch(() => undefined);
  for (const run of holders) await run.dispose().catch(() => undefined);
}, 200_000);
