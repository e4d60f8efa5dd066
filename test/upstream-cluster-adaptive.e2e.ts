/**
 * The adaptive limit holds for the pool (limit-state.ts in the endpoint's JetStream KV key): three
 * real members on a real nats-server, one real chat-completions server that streams at most 2
 * responses at once and answers 429 with `Retry-After` beyond that.
 * - A 429 storm on one member (the others not even started yet) cuts the pool's limit to 2.
 * - Afterwards all three members, 12 children between them, never have more than 2 requests at
 *   the server at once, and every member's status shows the pool's limit of 2.
 * - Once the cut's one-minute ceiling has passed and the provider serves more, successes probe
 *   the pool's limit back up.
 * Each wave's answers hold until the wave is at the endpoint, so what goes at once is the limiter's
 * doing, however slowly the starts arrive on a loaded machine.
 */
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService } from '../client/index.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-adaptive-');
const CEILING_HOLD_MS = 60_000;

async function waitUntil(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let tries = 0; !(await check()); tries++) {
    if (tries > 1200) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The answers of the wave under way hold after their first chunk until the test opens this. */
let gate: Promise<void> | undefined;
const answer = (): ScriptedResponse => {
  const [first, ...rest] = (usageAnswer(300, 10) as Extract<ScriptedResponse, { type: 'stream' }>).steps;
  return { type: 'stream', steps: [first!, ...(gate ? [{ gate }] : []), ...rest] };
};

/**
 * `count` children over `services`; their answers hold until `ready()` (so what goes at once is the
 * limiter's doing, however slowly the starts arrive), then all must complete.
 */
async function wave(services: readonly RemoteSubagentService[], name: string, count: number, ready: () => Promise<boolean> | boolean): Promise<void> {
  let open!: () => void;
  gate = new Promise<void>((resolve) => (open = resolve));
  // A start in a cluster answers once a member runs the child: more children than slots start as the first end.
  const starting = Array.from({ length: count }, (_, i) => startChild(services[i % services.length]!, `${name}-${i}`, AbortSignal.timeout(90_000)));
  await waitUntil(ready, `${name}: the wave at the endpoint`);
  open();
  const runs: RemoteSubagentRun[] = await Promise.all(starting);
  const results = await Promise.all(runs.map((run) => run.result));
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
  expect(results.map((r) => r.stopReason)).toEqual(Array(count).fill('completed'));
}

/** Every child of the wave is at the endpoint: sent, or waiting for a permit. */
const allAtEndpoint = (services: readonly RemoteSubagentService[], count: number) => async (): Promise<boolean> =>
  (await endpointStatuses(services)).reduce((n, e) => n + e.inFlight + e.waiting, 0) === count;

it('a 429 storm on one member cuts the pool\'s limit; no member exceeds it afterwards; successes probe it back up', async () => {
  const cap = { max: 2, retryAfter: '1' };
  server = await startChatCompletionsServer({ fallback: answer, streamLimit: cap });
  const served = server;
  const config = {
    model: { baseUrl: server.baseUrl, apiKeyEnv: 'ADAPTIVE_TEST_KEY', default: 'test-model' },
    limits: { maxConcurrentRuns: 16, maxRunsPerConnection: 16 },
  };
  const member = (): ReturnType<typeof scene.member> => scene.member(config, { slots: 4, ackWaitMs: 5_000 }, { env: { ADAPTIVE_TEST_KEY: 'k' } });

  // The storm: one member alone, 8 children, the pool's limit starting at 4 against a cap of 2
  // (the two served hold until the server has refused one).
  const first = await scene.clients.connect((await member()).socket);
  await wave([first], 'storm', 8, () => served.load.refused > 0);
  const cutSeen = Date.now();
  expect((await endpointStatuses([first])).map((e) => e.limit)).toEqual([2]);

  // Two more members join; 12 children over all three, held until all twelve are at the endpoint.
  const others = [await scene.clients.connect((await member()).socket), await scene.clients.connect((await member()).socket)];
  const all = [first, ...others];
  const refused = server.load.refused;
  server.load.openPeak = server.load.open;
  await wave(all, 'after', 12, allAtEndpoint(all, 12));
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
  await wave(all, 'probe', 12, allAtEndpoint(all, 12));
  expect(server.load.openPeak).toBeGreaterThan(2);
  const grown = (await endpointStatuses(all)).map((e) => e.limit);
  expect(Math.max(...grown)).toBeGreaterThan(2);
}, 200_000);
