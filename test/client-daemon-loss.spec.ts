import { afterEach, describe, expect, it } from 'vitest';
import { connect, SubagentError, type ClientStartRequest, type RemoteSubagentRun, type RemoteSubagentService } from '../client/index.js';
import { FakeDaemon, captureLogger, descriptor, until, type PeerConnection } from './support/fake-daemon-peer.js';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const never = (): Promise<never> => new Promise(() => undefined);

async function setup(handlers: Record<string, () => unknown> = {}): Promise<{
  daemon: FakeDaemon;
  peer: PeerConnection;
  service: RemoteSubagentService;
}> {
  const daemon = await FakeDaemon.start({ providers: [descriptor('spawn', { sendMessage: true })], handlers });
  cleanup.push(() => daemon.close());
  const service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
  cleanup.push(() => service.close());
  return { daemon, peer: await daemon.connection(), service };
}

function request(): ClientStartRequest {
  return { prompt: [{ type: 'text', text: 'task' }], signal: new AbortController().signal, parent: { sessionId: 'p', cwd: '/work' } };
}

/** Settle `promise`, returning the rejection and how long it took from `since`. */
async function rejectionOf(promise: Promise<unknown>, since: number): Promise<{ error: unknown; ms: number }> {
  const error = await promise.then(
    () => new Error('expected a rejection'),
    (failure: unknown) => failure,
  );
  return { error, ms: Date.now() - since };
}

function expectUnavailable(error: unknown, daemon: FakeDaemon): void {
  expect(error).toBeInstanceOf(SubagentError);
  expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
  expect((error as Error).message).toContain(daemon.socketPath);
}

describe('losing the daemon', { timeout: 5000 }, () => {
  it('mid-start: the pending start rejects with DAEMON_UNAVAILABLE within 1 s', async () => {
    const { daemon, peer, service } = await setup({ 'subagent/start': never });
    const starting = service.start('spawn', request());
    await until(() => peer.requests.some((entry) => entry.method === 'subagent/start'), 1000, 'the start');
    const since = Date.now();
    peer.socket.destroy();
    const { error, ms } = await rejectionOf(starting, since);
    expectUnavailable(error, daemon);
    expect(ms).toBeLessThan(1000);
  });

  it('mid-run: the unsettled result and every pending request reject within 1 s', async () => {
    const { daemon, peer, service } = await setup({ 'run/dispose': never, 'providers/list': never, 'run/wait': never });
    const run = (await service.start('spawn', request())) as RemoteSubagentRun;
    const settledRun = (await service.start('spawn', request())) as RemoteSubagentRun;
    await peer.finishRun(settledRun.id);
    await settledRun.result;
    const disposing = run.dispose();
    const listing = service.refreshProviders();
    const waiting = run.wait();
    await until(() => peer.requests.filter((entry) => entry.method !== 'initialize').length >= 5, 1000, 'requests to arrive');
    const since = Date.now();
    peer.socket.destroy();
    const outcomes = await Promise.all([run.result, disposing, listing, waiting].map((promise) => rejectionOf(promise, since)));
    for (const { error, ms } of outcomes) {
      expectUnavailable(error, daemon);
      expect(ms).toBeLessThan(1000);
    }
    // A run that had already settled keeps its result.
    await expect(settledRun.result).resolves.toMatchObject({ stopReason: 'completed' });
  });

  it('afterwards every call rejects at once, the same way', async () => {
    const { daemon, peer, service } = await setup();
    const run = (await service.start('spawn', request())) as RemoteSubagentRun;
    peer.socket.destroy();
    await until(() => service.disconnected !== undefined, 1000, 'the loss to be noticed');
    const since = Date.now();
    const outcomes = await Promise.all(
      [service.start('spawn', request()), service.refreshProviders(), run.dispose(), run.wait()].map((promise) =>
        rejectionOf(promise, since),
      ),
    );
    for (const { error, ms } of outcomes) {
      expectUnavailable(error, daemon);
      expect(ms).toBeLessThan(200);
    }
    // sendMessage cannot throw (the seam returns void); it must not hang or crash either.
    expect(run.sendMessage?.([{ type: 'text', text: 'x' }])).toBeUndefined();
  });

  it('a daemon that closes the socket right after its last notifications still delivers them', async () => {
    const { peer, service } = await setup();
    const events: string[] = [];
    const run = await service.start('spawn', { ...request(), onEvent: (event) => void events.push(event.kind) });
    const identity = { runId: run.id, provider: 'spawn', id: 'child-run-1', local: false };
    const deltas = Array.from({ length: 20 }, () => ({ method: 'run/event', params: { runId: run.id, event: { kind: 'text-delta', text: 'x' } } }));
    peer.endWith([
      ...deltas,
      { method: 'subagent/start', params: identity },
      { method: 'subagent/end', params: { ...identity, stopReason: 'completed', result: { output: [], stopReason: 'completed' } } },
    ]);
    await expect(run.result).resolves.toMatchObject({ stopReason: 'completed' });
    expect(events).toHaveLength(20);
    await until(() => service.disconnected !== undefined, 1000, 'the loss to be noticed');
  });

  it('close() rejects what is pending and later calls, without a `subagentd start` hint', async () => {
    const { service } = await setup({ 'providers/list': never });
    const run = await service.start('spawn', request());
    const listing = rejectionOf(service.refreshProviders(), Date.now());
    await service.close();
    const { error } = await listing;
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE', message: expect.stringContaining('closed by this client') });
    expect((error as Error).message).not.toContain('subagentd start');
    await expect(run.result).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    await expect(service.start('spawn', request())).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
  });
});
