/**
 * `tokensPerMinute` holds for the pool (limit-state.ts in the endpoint's JetStream KV key): three
 * real members on a real nats-server share a budget of 600 tokens a minute against one real
 * chat-completions server whose every answer reports 200 tokens of usage. With six children at
 * the endpoint at once (two per member), each member alone would send both (its own budget is
 * unused); together they send 3 (one probe, then two reserving the usage it showed), and the other 3
 * only once the first have left the sliding window, so no 60 s at the server holds more than 600 tokens.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { busiestWindow, endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-tpm-');
const TOKENS = 200;

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; !(await check()); tries++) {
    if (tries > 1200) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
const BUDGET = 600;

it('three members share tokensPerMinute: the server never gets more than the budget in any 60 s', async () => {
  // The answers hold until all six children are at the endpoint (sent or waiting): the pool decides with six at once.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const served = await startChatCompletionsServer({
    fallback: () => ({ type: 'stream', steps: [{ gate }, ...(usageAnswer(300, TOKENS) as Extract<ScriptedResponse, { type: 'stream' }>).steps] }),
  });
  server = served;
  const config = {
    model: { baseUrl: served.baseUrl, apiKeyEnv: 'TPM_TEST_KEY', default: 'test-model' },
    endpoints: { '*': { tokensPerMinute: BUDGET } },
  };
  const members = [];
  // Two slots each: six children run on three members at once, two per member.
  for (let i = 0; i < 3; i++) members.push(await scene.member(config, { slots: 2, ackWaitMs: 5_000 }, { env: { TPM_TEST_KEY: 'k' } }));
  const services = await Promise.all(members.map((m) => scene.clients.connect(m.socket)));
  const runs: RemoteSubagentRun[] = await Promise.all(
    Array.from({ length: 6 }, (_, i) => startChild(services[i % 3]!, `tpm-${i}`, AbortSignal.timeout(120_000))),
  );
  const atEndpoint = async (): Promise<{ inFlight: number; waiting: number }> =>
    (await endpointStatuses(services)).reduce((sum, e) => ({ inFlight: sum.inFlight + e.inFlight, waiting: sum.waiting + e.waiting }), { inFlight: 0, waiting: 0 });
  await waitUntil(async () => {
    const { inFlight, waiting } = await atEndpoint();
    return inFlight + waiting === 6;
  }, 'all six children at the endpoint');
  // Before any usage is known, one probe goes alone, whichever member sent it.
  expect(server.requests).toHaveLength(1);
  release();
  // The probe used 200: two more reserve 200 each, and the budget is spent; three wait for the window.
  await waitUntil(async () => served.requests.length > 3 || (served.requests.length === 3 && (await atEndpoint()).waiting === 3), 'three sent, three waiting');
  expect(server.requests).toHaveLength(3);
  const results = await Promise.all(runs.map((run) => run.result));
  expect(results.map((r) => r.stopReason)).toEqual(Array(6).fill('completed'));
  expect(server.requests).toHaveLength(6);
  // Every answer is 200 tokens: at most 3 requests in any 60 s.
  expect(busiestWindow(server).count * TOKENS).toBeLessThanOrEqual(BUDGET);
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
}, 180_000);
