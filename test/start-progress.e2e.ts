/**
 * What a client learns while it waits, from a real daemon process over its socket: a start's
 * `$/progress` (its place in the queue as the queue moves, starting, an ACP agent spawning and
 * initializing, ready) and a `retry` run event when the model's server answers 429 with
 * Retry-After. The daemon runs one child at a time (`maxConcurrentRuns: 1`), so a second and a
 * third start queue behind a run that holds the slot until it is cancelled.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContentBlock, RemoteSubagentService, RunEvent, StartProgress, SubagentRun } from '../client/index.js';
import { makeWorkspace, SDK_AGENT, waitFor, type Workspace } from './fixtures/acp-harness.js';
import { errorResponse, textResponse } from './support/chat-completions-server.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, perTestModelServer, RunPool } from './support/e2e-daemon.js';
import { ModelServer } from './support/e2e-model-server.js';
import { RawPeer } from './support/raw-peer.js';

let server: ModelServer;
let daemon: DaemonProcess;
let cwd: string;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  server = await ModelServer.start();
  daemon = await startDaemon(
    {
      limits: { maxConcurrentRuns: 1 },
      model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', maxRetries: 2 },
      providers: [
        { type: 'acp', name: 'sdk-agent', command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'reply' }, initializeTimeoutMs: 5000 },
      ],
      detachGraceMs: 0,
    },
    [],
    { env: { TEST_KEY: 'sk-start-progress' } },
  );
  cwd = mkdtempSync(join(tmpdir(), 'subagentd-start-progress-'));
});

afterAll(async () => {
  await daemon?.stop();
  await server?.close();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

perTestModelServer(() => server, runs, clients);

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
const parent = (name: string) => ({ sessionId: `progress-${name}`, cwd });
const live = (): AbortSignal => new AbortController().signal;

/** Starts `prompt` on the fixture provider `echo`, recording its start progress. */
function startRecorded(
  service: RemoteSubagentService,
  prompt: string,
  signal: AbortSignal,
): { progress: StartProgress[]; run: Promise<SubagentRun> } {
  const progress: StartProgress[] = [];
  const run = service
    .start('echo', { prompt: text(prompt), parent: parent(prompt), signal, onStartProgress: (value) => progress.push(value) })
    .then((started) => runs.track(started));
  run.catch(() => undefined);
  return { progress, run };
}

describe('start progress over the wire', () => {
  it('tells two waiting starts their place in line, in order, as the line moves', { timeout: 30_000 }, async () => {
    const [first, second, third] = await Promise.all([clients.connect(daemon.socket), clients.connect(daemon.socket), clients.connect(daemon.socket)]);
    const holdA = new AbortController();
    const a = runs.track(await first.start('echo', { prompt: text('hang'), parent: parent('a'), signal: holdA.signal }));

    const holdB = new AbortController();
    const b = startRecorded(second, 'hang', holdB.signal);
    await waitFor(() => b.progress.length > 0, 10_000, 'B to be queued');
    const c = startRecorded(third, 'echo c', live());
    await waitFor(() => c.progress.length > 0, 10_000, 'C to be queued');
    expect(b.progress).toEqual([{ kind: 'queued', position: 1 }]);
    expect(c.progress).toEqual([{ kind: 'queued', position: 2 }]);

    holdA.abort(); // A is cancelled, its slot goes to B; C moves up
    const bRun = await b.run;
    expect((await a.result).stopReason).toBe('aborted');
    await waitFor(() => c.progress.length > 1, 10_000, 'C to move up');
    expect(b.progress).toEqual([{ kind: 'queued', position: 1 }, { kind: 'starting' }, { kind: 'ready', runId: bRun.id }]);
    expect(c.progress).toEqual([{ kind: 'queued', position: 2 }, { kind: 'queued', position: 1 }]);

    holdB.abort();
    const cRun = await c.run;
    expect((await cRun.result).stopReason).toBe('completed');
    expect(c.progress).toEqual([{ kind: 'queued', position: 2 }, { kind: 'queued', position: 1 }, { kind: 'starting' }, { kind: 'ready', runId: cRun.id }]);
  });

  it('a start that did not ask gets no progress, and one that did not wait is not queued', { timeout: 30_000 }, async () => {
    const service = await clients.connect(daemon.socket);
    const progress: StartProgress[] = [];
    const run = runs.track(await service.start('echo', { prompt: text('echo alone'), parent: parent('alone'), signal: live(), onStartProgress: (value) => progress.push(value) }));
    expect(progress).toEqual([{ kind: 'starting' }, { kind: 'ready', runId: run.id }]);
    expect((await run.result).stopReason).toBe('completed');
  });

  it("reports an ACP agent's spawning and initializing before it is ready", { timeout: 30_000 }, async () => {
    const ws: Workspace = await makeWorkspace();
    try {
      const service = await clients.connect(daemon.socket);
      const progress: StartProgress[] = [];
      const run = runs.track(
        await service.start('sdk-agent', { prompt: text('hello'), parent: { sessionId: 'progress-acp', cwd: ws.root }, signal: live(), onStartProgress: (value) => progress.push(value) }),
      );
      expect(progress).toEqual([
        { kind: 'starting' },
        { kind: 'agent', stage: 'spawning' },
        { kind: 'agent', stage: 'initializing' },
        { kind: 'ready', runId: run.id },
      ]);
      expect((await run.result).stopReason).toBe('completed');
      await run.dispose();
    } finally {
      await ws.cleanup();
    }
  });
});

describe('model retries as run events', () => {
  it("streams a retry with the attempt and the server's Retry-After, then the answer", { timeout: 30_000 }, async () => {
    server.enqueue(errorResponse(429, 'Rate limit reached for requests', { 'retry-after': '1' }), textResponse(['answered after the wait']));
    const service = await clients.connect(daemon.socket);
    const events: RunEvent[] = [];
    const run = runs.track(await service.start('spawn', { prompt: text('say something'), parent: parent('retry'), signal: live(), onEvent: (event) => events.push(event) }));
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.output).toEqual(text('answered after the wait'));
    expect(server.requests).toHaveLength(2);
    const retries = events.filter((event) => event.kind === 'retry');
    expect(retries).toEqual([{ kind: 'retry', attempt: 2, delayMs: 1000, status: 429, reason: 'HTTP 429: Rate limit reached for requests' }]);
    // Announced before the wait, so it comes before the answer's text.
    expect(events.findIndex((event) => event.kind === 'retry')).toBeLessThan(events.findIndex((event) => event.kind === 'text-delta'));
  });

  it('a 1.0 client, whose schema has no retry events, is not sent them', { timeout: 30_000 }, async () => {
    server.enqueue(errorResponse(429, 'Rate limit reached', { 'retry-after': '1' }), textResponse(['answered for an old client']));
    const peer = await RawPeer.connect(daemon.socket);
    try {
      const token = readFileSync(`${daemon.socket}.token`, 'utf8').trim();
      const hello = await peer.request('initialize', { protocolVersion: '1.0.0', clientInfo: { name: 'old-client', version: '1.0.0' }, token });
      expect(hello.error).toBeUndefined();
      const started = await peer.request('subagent/start', { provider: 'spawn', prompt: text('say something'), parent: parent('old'), stream: true });
      const { runId } = started.result as { runId: string };
      await peer.waitFor((m) => m.method === 'subagent/end', 10_000, 'the end of the run');
      expect(server.requests).toHaveLength(2); // the daemon did retry
      const kinds = peer.notifications('run/event').map((m) => (m.params as { event: RunEvent }).event.kind);
      expect(kinds).toContain('text-delta');
      expect(kinds).not.toContain('retry');
      await peer.request('run/dispose', { runId });
    } finally {
      peer.close();
    }
  });
});

describe('the start as run events (1.6)', () => {
  const startParams = (prompt: string, token: string) => ({ provider: 'echo', prompt: text(prompt), parent: parent(token), stream: true, progressToken: token });

  it("sends a queued start's places in line as run events, in order, right after the answer; a 1.5 client gets only $/progress", { timeout: 30_000 }, async () => {
    const first = await clients.connect(daemon.socket);
    const holdA = new AbortController();
    const a = runs.track(await first.start('echo', { prompt: text('hang'), parent: parent('hold'), signal: holdA.signal }));
    const old = await RawPeer.initialized(daemon.socket, 'old-client', '1.5.0');
    const current = await RawPeer.initialized(daemon.socket, 'current-client');
    try {
      const progressOf = (peer: RawPeer, token: string): unknown[] =>
        peer.notifications('$/progress').filter((m) => (m.params as { token: string }).token === token).map((m) => (m.params as { value: unknown }).value);
      // The old client queues first (1st in line), the current one behind it (2nd).
      const oldReply = old.request('subagent/start', startParams('echo old', 'old'), 25_000);
      await waitFor(() => progressOf(old, 'old').length > 0, 10_000, 'the old start to be queued');
      const currentReply = current.request('subagent/start', startParams('echo current', 'current'), 25_000);
      await waitFor(() => progressOf(current, 'current').length > 0, 10_000, 'the current start to be queued');

      holdA.abort(); // the slot goes to the old client's start, then to the current one's
      expect((await a.result).stopReason).toBe('aborted');
      const oldRun = ((await oldReply).result as { runId: string }).runId;
      const currentRun = ((await currentReply).result as { runId: string }).runId;
      await old.waitFor((m) => m.method === 'subagent/end', 10_000, 'the old run to end');
      await current.waitFor((m) => m.method === 'subagent/end', 10_000, 'the current run to end');

      // $/progress is unchanged for both.
      expect(progressOf(old, 'old')).toEqual([{ kind: 'queued', position: 1 }, { kind: 'starting' }, { kind: 'ready', runId: oldRun }]);
      expect(progressOf(current, 'current')).toEqual([
        { kind: 'queued', position: 2 },
        { kind: 'queued', position: 1 },
        { kind: 'starting' },
        { kind: 'ready', runId: currentRun },
      ]);

      // The current client's run opens with its places in line, and nothing of the run comes before the answer naming it.
      const events = current.runEvents().filter((e) => e.runId === currentRun);
      expect(events.slice(0, 2).map((e) => e.event)).toEqual([
        { kind: 'queued', position: 2 },
        { kind: 'queued', position: 1 },
      ]);
      expect(events.map((e) => e.event.kind)).toContain('text-delta');
      const answeredAt = current.messages.findIndex((m) => m.result !== undefined && (m.result as { runId?: string }).runId === currentRun);
      expect(answeredAt).toBeGreaterThanOrEqual(0);
      expect(current.messages.indexOf(events[0]!.message)).toBeGreaterThan(answeredAt);

      // The 1.5 client, whose schema has no such kinds, still gets its run's stream without them.
      const oldKinds = old.runEvents().filter((e) => e.runId === oldRun).map((e) => e.event.kind);
      expect(oldKinds).toContain('text-delta');
      expect(oldKinds).not.toContain('queued');
      for (const [peer, runId] of [[old, oldRun], [current, currentRun]] as const) await peer.request('run/dispose', { runId });
    } finally {
      old.close();
      current.close();
    }
  });

  it("streams an ACP agent's spawning and initializing as the run's first events", { timeout: 30_000 }, async () => {
    const ws: Workspace = await makeWorkspace();
    try {
      const service = await clients.connect(daemon.socket);
      const events: RunEvent[] = [];
      const run = runs.track(
        await service.start('sdk-agent', { prompt: text('hello'), parent: { sessionId: 'events-acp', cwd: ws.root }, signal: live(), onEvent: (event) => events.push(event) }),
      );
      expect((await run.result).stopReason).toBe('completed');
      expect(events.slice(0, 2)).toEqual([
        { kind: 'agent-starting', stage: 'spawning' },
        { kind: 'agent-starting', stage: 'initializing' },
      ]);
      // A start that was not queued has no `queued` event.
      expect(events.map((event) => event.kind)).not.toContain('queued');
      await run.dispose();
    } finally {
      await ws.cleanup();
    }
  });
});
