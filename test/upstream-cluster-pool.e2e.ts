/**
 * The pool-wide parts of an endpoint's limits beyond `maxConcurrent` (kv-shared-limit.ts), on three
 * real members (real daemons on a real nats-server) against one real chat-completions server:
 * - a 429 with `Retry-After` on one member is written into the endpoint's KV key, and no member
 *   sends the endpoint a request before that pause ends;
 * - `requestsPerMinute` is a sliding window of the pool's requests: three members with a pool
 *   limit of 3 send 3, the rest wait until those have left the window (a minute later, not at the
 *   minute's turn), so no 60 s at the server sees more than 3.
 */
import { Kvm } from '@nats-io/kv';
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService, RunEvent } from '../client/index.js';
import { waitFor } from './fixtures/acp-harness.js';
import { chunk, errorResponse, startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { clusterScene } from './support/cluster-scene.js';
import { busiestWindow, endpointStatuses } from './support/upstream-pool.js';

let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
const scene = clusterScene('subagentd-upstream-pool-');

const streamed = (): ScriptedResponse => ({
  type: 'stream',
  steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { data: chunk({ content: 'done' }, { finish_reason: 'stop' }) }, { done: true }],
});

async function threeMembers(endpoint: Record<string, number>): Promise<RemoteSubagentService[]> {
  const config = {
    model: { baseUrl: server!.baseUrl, apiKeyEnv: 'POOL_TEST_KEY', default: 'test-model' },
    endpoints: { '*': endpoint },
  };
  const members = [];
  // One slot each: concurrent children land on different members.
  for (let i = 0; i < 3; i++) members.push(await scene.member(config, { slots: 1, ackWaitMs: 5_000 }, { env: { POOL_TEST_KEY: 'k' } }));
  return Promise.all(members.map((m) => scene.clients.connect(m.socket)));
}

const start = (service: RemoteSubagentService, name: string, signal: AbortSignal, onEvent?: (event: RunEvent) => void): Promise<RemoteSubagentRun> =>
  service.start('spawn', {
    prompt: [{ type: 'text', text: name }],
    parent: { sessionId: `pool-${name}`, cwd: process.cwd() },
    signal,
    ...(onEvent && { onEvent }),
  }) as Promise<RemoteSubagentRun>;

it("a 429 with Retry-After on one member pauses the endpoint for every member", async () => {
  server = await startChatCompletionsServer({ fallback: streamed });
  server.enqueue(errorResponse(429, 'Rate limit reached', { 'retry-after': '3' }));
  const services = await threeMembers({ maxConcurrent: 8 });
  const events: RunEvent[] = [];
  const first = await start(services[0]!, 'first', AbortSignal.timeout(60_000), (event) => events.push(event));
  await waitFor(() => server!.requests.length >= 1, 20_000, 'the first request (answered 429)');

  // The pause is published in the endpoint's KV key.
  const link = await scene.link();
  const kv = await new Kvm(link.js).open('subagentd_upstream');
  let pausedUntil = 0;
  for (let i = 0; i < 400 && pausedUntil === 0; i++) {
    for await (const key of await kv.keys()) {
      const entry = await kv.get(key);
      pausedUntil = (entry?.json<{ pausedUntil?: number }>().pausedUntil ?? 0) || pausedUntil;
    }
    if (pausedUntil === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(pausedUntil).toBeGreaterThanOrEqual(server.requests[0]!.receivedAt + 3000);

  // Two more children, which run on the other members (one slot each), start while it lasts.
  const others = await Promise.all([start(services[1]!, 'second', AbortSignal.timeout(60_000)), start(services[2]!, 'third', AbortSignal.timeout(60_000))]);
  const results = await Promise.all([first, ...others].map((run) => run.result));
  expect(results.map((r) => r.stopReason)).toEqual(['completed', 'completed', 'completed']);
  expect(server.requests).toHaveLength(4); // the refused one, its retry, and the two others
  for (const request of server.requests.slice(1)) expect(request.receivedAt).toBeGreaterThanOrEqual(pausedUntil);
  await Promise.all([first, ...others].map((run) => run.dispose().catch(() => undefined)));
}, 120_000);

it('requestsPerMinute is a sliding window for the pool: no 60 s at the server, a minute\'s turn included, holds more than the limit', async () => {
  server = await startChatCompletionsServer({ fallback: streamed });
  const services = await threeMembers({ requestsPerMinute: 3 });
  const runs: RemoteSubagentRun[] = [];
  // Two bursts of three, one child per member (each member far below 3 a minute of its own). The
  // second waits a full minute after the first, so the run spans a minute's turn wherever it starts:
  // a calendar-minute counter lets the second burst go at that turn, 6 requests within 60 s.
  for (const round of [0, 1]) {
    const started = await Promise.all(services.map((service, i) => start(service, `r${round}-${i}`, AbortSignal.timeout(120_000))));
    runs.push(...started);
    if (round === 0) {
      const results = await Promise.all(started.map((run) => run.result));
      expect(results.map((r) => r.stopReason)).toEqual(['completed', 'completed', 'completed']);
    }
  }
  // While the first burst is in the window, the second waits for the pool on its members.
  for (let pending = 0, tries = 0; pending !== 3; tries++) {
    if (tries > 400) throw new Error(`the second burst never waited for the pool (${pending} pending)`);
    if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    pending = (await endpointStatuses(services)).reduce((n, e) => n + e.inFlight + e.waiting, 0);
  }
  expect(server.requests).toHaveLength(3);
  const results = await Promise.all(runs.map((run) => run.result));
  expect(results.map((r) => r.stopReason)).toEqual(Array(6).fill('completed'));
  expect(server.requests).toHaveLength(6);
  expect(busiestWindow(server).count).toBe(3);
  await Promise.all(runs.map((run) => run.dispose().catch(() => undefined)));
}, 150_000);
