/**
 * One governed upstream, end to end: a real daemon process, real clients, and a real HTTP server
 * speaking chat completions that, like a provider, streams at most 4 responses at once and answers
 * 429 with `Retry-After` beyond that (or holds requests with `: keep-alive` comments).
 */
import { tmpdir } from 'node:os';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ContentBlock, RemoteSubagentRun, RunEvent, SubagentResult } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { endpointStatuses, startChild, usageAnswer } from './support/upstream-pool.js';

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
const never = (): AbortSignal => new AbortController().signal;
const STREAM_LIMIT = 4;

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; !(await check()); tries++) {
    if (tries > 1200) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A streamed answer that takes `ms` (empty deltas meanwhile), then says `answer` with usage. */
function answer(reply: string, ms: number): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      { repeat: { data: chunk({ content: '' }) }, everyMs: 50, forMs: ms },
      { data: chunk({ content: reply }, { finish_reason: 'stop', usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 } }) },
      { done: true },
    ],
  };
}

const clients = new ClientPool();
const runs = new RunPool();
afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
});

interface Scene {
  server: ChatCompletionsServer;
  daemon: DaemonProcess;
}
const scenes: Scene[] = [];
afterAll(async () => {
  for (const scene of scenes.splice(0)) {
    await scene.daemon.stop().catch(() => undefined);
    await scene.server.close();
  }
});

async function scene(respond: () => ScriptedResponse, config: Record<string, unknown> = {}, model: Record<string, unknown> = {}): Promise<Scene> {
  const server = await startChatCompletionsServer({ fallback: respond, streamLimit: { max: STREAM_LIMIT, retryAfter: '1' } });
  const daemon = await startE2eDaemon(
    {
      model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', ...model },
      limits: { maxConcurrentRuns: 64, maxRunsPerConnection: 64 },
      detachGraceMs: 0,
      ...config,
    },
    { TEST_KEY: 'sk-upstream-e2e' },
  );
  const made = { server, daemon };
  scenes.push(made);
  return made;
}

async function startMany(
  socket: string,
  count: number,
  name: string,
  finished: Array<{ client: string; result: SubagentResult }>,
  events: RunEvent[][],
): Promise<Array<Promise<SubagentResult>>> {
  const service = await clients.connect(socket, { clientInfo: { name, version: '1' } });
  const started = Array.from({ length: count }, async (_, i) => {
    const seen: RunEvent[] = [];
    events.push(seen);
    const run = runs.track(
      (await service.start('spawn', {
        prompt: text(`task ${i} of ${name}`),
        parent: { sessionId: `${name}-parent`, cwd: tmpdir() },
        signal: never(),
        onEvent: (event) => void seen.push(event),
      })) as RemoteSubagentRun,
    );
    return run;
  });
  // Every start answered: each child is streaming or waiting for the endpoint.
  const handed = await Promise.all(started);
  return handed.map((run) =>
    run.result.then((result) => {
      finished.push({ client: name, result });
      return result;
    }),
  );
}

describe('one governed upstream per endpoint', () => {
  it('40 children against a 4-stream provider all complete, with at most 10% of requests refused', async () => {
    const { server, daemon } = await scene(() => answer('done', 400));
    const finished: Array<{ client: string; result: SubagentResult }> = [];
    const events: RunEvent[][] = [];
    const results = await Promise.all(await startMany(daemon.socket, 40, 'solo', finished, events));

    expect(results.map((r) => r.stopReason)).toEqual(Array(40).fill('completed'));
    const total = server.load.streamed + server.load.refused;
    expect(server.load.streamed).toBe(40);
    expect(server.load.refused / total).toBeLessThanOrEqual(0.1);
    // Most children waited their turn at the daemon and were told so.
    const waited = events.filter((seen) => seen.some((e) => e.kind === 'model-wait' && e.position > 0));
    expect(waited.length).toBeGreaterThan(20);

    const status = await (await clients.connect(daemon.socket)).ops.status();
    expect(status.endpoints).toEqual([
      expect.objectContaining({ endpoint: server.baseUrl, inFlight: 0, waiting: 0, requestsPerMinute: total, tokensPerMinute: 40 * 12 }),
    ]);
    expect(status.endpoints![0]!.limit).toBeLessThanOrEqual(STREAM_LIMIT);
    expect(status.endpoints![0]!.throttledLastMinute).toBe(server.load.refused);
  }, 120_000);

  it('tokensPerMinute reserves usage for requests in flight: 6 children at once, a budget of 3 answers, 3 sent', async () => {
    // The answers hold until all six children are at the endpoint (sent or waiting), so the
    // governor decides with six at once, however slowly the starts arrive.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gated = (): ScriptedResponse => ({ type: 'stream', steps: [{ gate }, ...(usageAnswer(200, 200) as Extract<ScriptedResponse, { type: 'stream' }>).steps] });
    const { server, daemon } = await scene(gated, { endpoints: { '*': { tokensPerMinute: 600 } } });
    const service = await clients.connect(daemon.socket);
    await Promise.all(Array.from({ length: 6 }, async (_, i) => runs.track(await startChild(service, `tpm-${i}`, never()))));
    const atEndpoint = async (): Promise<{ inFlight: number; waiting: number }> => (await endpointStatuses([service]))[0] ?? { inFlight: 0, waiting: 0 };
    await waitUntil(async () => {
      const { inFlight, waiting } = await atEndpoint();
      return inFlight + waiting === 6;
    }, 'all six children at the endpoint');
    // Before any usage is known, one probe goes alone.
    expect(server.requests).toHaveLength(1);
    release();
    // The probe used 200: two more reserve 200 each, and the budget is spent; three wait.
    await waitUntil(async () => server.requests.length > 3 || (server.requests.length === 3 && (await atEndpoint()).waiting === 3), 'three sent, three waiting');
    expect(server.requests).toHaveLength(3);
    await Promise.all(server.requests.map((r) => r.closed));
    expect((await endpointStatuses([service]))[0]).toMatchObject({ tokensPerMinute: 600, tokensPerMinuteLimit: 600, inFlight: 0, waiting: 3 });
    expect(server.requests).toHaveLength(3);
  }, 120_000);

  it('two clients of 20 children each are served in turn: their finish times interleave', async () => {
    // The first streams hold until both clients' children are all queued, so the order in which
    // the rest are let through is the governor's alone, however slowly the starts arrive.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gated = (): ScriptedResponse => ({
      type: 'stream',
      steps: [{ gate }, ...(answer('done', 100) as Extract<ScriptedResponse, { type: 'stream' }>).steps],
    });
    const { daemon } = await scene(gated, { endpoints: { '*': { maxConcurrent: STREAM_LIMIT } } });
    const finished: Array<{ client: string; result: SubagentResult }> = [];
    const events: RunEvent[][] = [];
    // A's twenty are all started (4 streaming, 16 queued at the endpoint) before B starts any.
    const a = await startMany(daemon.socket, 20, 'client-a', finished, events);
    const b = await startMany(daemon.socket, 20, 'client-b', finished, events);
    const status = await (await clients.connect(daemon.socket)).ops.status();
    expect(status.endpoints?.[0]).toMatchObject({ inFlight: STREAM_LIMIT, waiting: 40 - STREAM_LIMIT, limit: STREAM_LIMIT });
    release();
    const results = await Promise.all([...a, ...b]);
    expect(results.every((r) => r.stopReason === 'completed')).toBe(true);

    const order = finished.map((f) => f.client);
    const lastA = order.lastIndexOf('client-a');
    // First come, first served would finish all of A first; in turn, B's finish among A's.
    expect(order.indexOf('client-b')).toBeLessThan(lastA);
    expect(order.slice(0, lastA).filter((c) => c === 'client-b').length).toBeGreaterThanOrEqual(12);
  }, 120_000);
});
