/**
 * The reconnect policy's corners, against the fake daemon (which can answer each connection
 * differently): what `run/attach` answers decides each run, requests in flight at the loss
 * reject, cancels wait for the new connection, `close()` stops re-dialling, a protocol change
 * is not retried, and the backoff stays within its bounds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  connect,
  PROTOCOL_VERSION,
  SubagentError,
  type ClientStartRequest,
  type ReconnectOptions,
  type RemoteSubagentRun,
  type RemoteSubagentService,
  type SubagentEndEvent,
} from '../client/index.js';
import { backoffDelay, reconnectPolicy } from '../client/reconnect.js';
import {
  COMPLETED,
  FakeDaemon,
  IDENTITY,
  captureLogger,
  daemonError,
  delay,
  descriptor,
  until,
  type PeerHandler,
} from './support/fake-daemon-peer.js';
import { next, track } from './support/reconnect-harness.js';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const never = (): Promise<never> => new Promise(() => undefined);

function request(signal = new AbortController().signal): ClientStartRequest {
  return { prompt: [{ type: 'text', text: 'task' }], signal, parent: { sessionId: 'p', cwd: '/work' } };
}


function runInfo(runId: string, state = 'running'): Record<string, unknown> {
  return { runId, id: `child-${runId}`, provider: 'spawn', state, startedAt: '2026-12-02T00:00:00.000Z', mine: true };
}

/**
 * A fake daemon whose connections are numbered: `handlers(index)` answers connection `index`
 * (0 = the first). `initialize` defaults to epoch `epoch-<index>` unless overridden.
 */
async function setup(
  handlers: (index: number) => Record<string, PeerHandler>,
  reconnect: ReconnectOptions = { maxAttempts: 5, initialDelayMs: 10, maxDelayMs: 40 },
): Promise<{ daemon: FakeDaemon; service: RemoteSubagentService; logger: ReturnType<typeof captureLogger> }> {
  const providers = [descriptor('spawn', { sendMessage: true })];
  const route =
    (method: string): PeerHandler =>
    (params, context) => {
      const index = daemon.connections.indexOf(context.peer);
      const handler = handlers(index)[method];
      if (handler) return handler(params, context);
      if (method === 'initialize') return { protocolVersion: PROTOCOL_VERSION, daemon: { ...IDENTITY, epoch: `epoch-${index}` }, providers };
      if (method === 'subagent/start') {
        const runId = context.peer.nextRunId();
        return { runId, provider: 'spawn', id: `child-${runId}`, local: false, runToken: `token-${runId}` };
      }
      if (method === 'run/attach') return { run: runInfo((params as { runId: string }).runId) };
      if (method === 'run/wait') return never();
      return {};
    };
  const methods = ['initialize', 'subagent/start', 'run/attach', 'run/wait', 'run/cancel', 'run/dispose', 'run/sendMessage', 'providers/list'];
  const daemon = await FakeDaemon.start({ providers, handlers: Object.fromEntries(methods.map((method) => [method, route(method)])) });
  cleanup.push(() => daemon.close());
  const logger = captureLogger();
  const service = await connect({ socket: daemon.socketPath, logger, reconnect });
  cleanup.push(() => service.close());
  return { daemon, service, logger };
}

describe('reconnect', { timeout: 5000 }, () => {
  it('run/attach decides each run: a result resolves it, unknown rejects it as lost, running waits for subagent/end', async () => {
    const { daemon, service } = await setup((index) =>
      index === 0
        ? { 'run/dispose': never }
        : {
            initialize: () => ({
              protocolVersion: PROTOCOL_VERSION,
              daemon: { ...IDENTITY, epoch: 'epoch-restarted' },
              providers: [descriptor('spawn', { sendMessage: true }), descriptor('extra')],
            }),
            'run/attach': (params: { runId: string }) => {
              if (params.runId === 'run-1') return { run: runInfo('run-1', 'settled'), result: { ...COMPLETED, stopReason: 'error', diagnostic: 'interrupted: gone' } };
              if (params.runId === 'run-2') return daemonError('NOT_OWNER', 'no run run-2 with that token');
              return { run: runInfo(params.runId) };
            },
          },
    );
    const first = await daemon.connection(0);
    const [settledHere, lostRun, running] = [await service.start('spawn', request()), await service.start('spawn', request()), await service.start('spawn', request())];
    const ends: SubagentEndEvent[] = [];
    service.on('subagent/end', (event) => void ends.push(event));
    const added: string[] = [];
    service.on('subagent/provider-added', ({ provider }) => void added.push(provider.name));
    const disposing = settledHere.dispose();
    await until(() => first.paramsOf('run/dispose').length === 1, 1000, 'the dispose to arrive');
    const disconnected = next(service, 'disconnected');
    const reconnected = next(service, 'reconnected');
    const outcome = track(running.result);

    first.socket.destroy();
    expect(await disconnected).toMatchObject({ reconnecting: true, error: { code: 'DAEMON_UNAVAILABLE' } });
    // In flight at the loss: it may not have reached the daemon, so it rejects.
    await expect(disposing).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect(await reconnected).toEqual({ epoch: 'epoch-restarted', restarted: true, attempts: 1 });

    const second = await daemon.connection(1);
    expect(second.paramsOf('run/attach')).toEqual(
      expect.arrayContaining([
        { runId: 'run-1', runToken: 'token-run-1' },
        { runId: 'run-2', runToken: 'token-run-2' },
        { runId: 'run-3', runToken: 'token-run-3' },
      ]),
    );
    await expect(settledHere.result).resolves.toMatchObject({ stopReason: 'error', diagnostic: 'interrupted: gone' });
    expect(ends).toEqual([expect.objectContaining({ runId: 'run-1', provider: 'spawn', stopReason: 'error', local: false })]);
    const lost = await lostRun.result.catch((error: unknown) => error);
    expect(lost).toBeInstanceOf(SubagentError);
    expect(lost).toMatchObject({ code: 'DAEMON_UNAVAILABLE', message: expect.stringMatching(/run run-2 was lost.*no longer knows it/) });
    // Still running: run/wait is the backstop, subagent/end on the new connection settles it.
    await until(() => second.paramsOf('run/wait').length === 1, 1000, 'the run/wait backstop');
    expect(outcome.settled).toBe(false);
    await second.finishRun('run-3');
    await expect(running.result).resolves.toEqual(COMPLETED);
    // Providers come from the new initialize; a dispose that failed with the connection can be retried.
    expect(added).toEqual(['extra']);
    expect(service.list()).toEqual(['spawn', 'extra']);
    await expect(settledHere.dispose()).resolves.toBeUndefined();
    expect(second.paramsOf('run/dispose')).toEqual([{ runId: 'run-1' }]);
    // New work goes to the new connection.
    const fresh = await service.start('spawn', request());
    expect(second.paramsOf('subagent/start')).toHaveLength(1);
    running.sendMessage?.([{ type: 'text', text: 'late' }]);
    await until(() => second.paramsOf('run/sendMessage').length === 1, 1000, 'sendMessage on the new connection');
    await fresh.dispose();
  });

  it('wait() and a cancel (signal) during the gap follow through once the run is re-attached', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { daemon, service } = await setup((index) =>
      index === 1 ? { 'run/attach': async (params: { runId: string }) => (await gate, { run: runInfo(params.runId) }) } : {},
    );
    const first = await daemon.connection(0);
    const controller = new AbortController();
    const run = (await service.start('spawn', request(controller.signal))) as RemoteSubagentRun;
    const reconnected = next(service, 'reconnected');
    first.socket.destroy();
    await until(() => service.disconnected !== undefined, 1000, 'the loss');
    const waiting = run.wait();
    controller.abort();
    await expect(service.start('spawn', request())).rejects.toMatchObject({
      code: 'DAEMON_UNAVAILABLE',
      message: expect.stringContaining("after the 'reconnected' event"),
    });
    const second = await daemon.connection(1);
    release();
    const back = await reconnected;
    expect(back).toMatchObject({ attempts: 1 });
    await until(() => second.paramsOf('run/cancel').length === 1, 1000, 'the deferred cancel');
    expect(second.paramsOf('run/cancel')).toEqual([{ runId: run.id }]);
    await second.finishRun(run.id);
    await expect(waiting).resolves.toEqual(COMPLETED);
  });

  it('a start whose answer never came is sent again after the reconnect, under the same idempotency key', async () => {
    const { daemon, service } = await setup((index) => (index === 0 ? { 'subagent/start': () => never() } : {}));
    const first = await daemon.connection(0);
    const starting = service.start('spawn', request());
    await until(() => first.paramsOf('subagent/start').length === 1, 1000, 'the start to arrive');
    first.socket.destroy();
    const second = await daemon.connection(1);
    const run = (await starting) as RemoteSubagentRun;
    const [sent] = first.paramsOf('subagent/start') as Array<{ idempotencyKey: string }>;
    expect(sent!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(second.paramsOf('subagent/start')).toEqual([sent]);
    expect(run.id).toBeDefined();
    // A key the caller chose goes out as given.
    await service.start('spawn', { ...request(), idempotencyKey: 'my-key' });
    expect(second.paramsOf('subagent/start')).toMatchObject([sent, { idempotencyKey: 'my-key' }]);
  });

  it('reports restarted: false when the epoch is unchanged', async () => {
    const same = () => ({ protocolVersion: PROTOCOL_VERSION, daemon: IDENTITY, providers: [descriptor('spawn')] });
    const { daemon, service } = await setup(() => ({ initialize: same }));
    await service.start('spawn', request());
    const reconnected = next(service, 'reconnected');
    (await daemon.connection(0)).socket.destroy();
    expect(await reconnected).toEqual({ epoch: IDENTITY.epoch, restarted: false, attempts: 1 });
    expect(service.disconnected).toBeUndefined();
  });

  it('close() while reconnecting stops re-dialling and rejects the runs as closed by this client', async () => {
    const { daemon, service, logger } = await setup(
      (index) => (index === 0 ? {} : { initialize: () => daemonError('UNAUTHORIZED', 'bad token') }),
      { maxAttempts: 1000, initialDelayMs: 10, maxDelayMs: 20 },
    );
    const run = await service.start('spawn', request());
    (await daemon.connection(0)).socket.destroy();
    await daemon.connection(2);
    await service.close();
    await expect(run.result).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE', message: expect.stringContaining('closed by this client') });
    const dialled = daemon.connections.length;
    await delay(150);
    expect(daemon.connections.length).toBe(dialled);
    expect(logger.lines.some((line) => /reconnect attempt 1 of 1000 .*bad token/.test(line))).toBe(true);
  });

  it('a daemon that now speaks another major protocol version is not retried', async () => {
    const { daemon, service } = await setup(
      (index) => (index === 0 ? {} : { initialize: () => ({ protocolVersion: '99.0.0', daemon: IDENTITY, providers: [] }) }),
      { maxAttempts: 50, initialDelayMs: 10, maxDelayMs: 20 },
    );
    const run = await service.start('spawn', request());
    (await daemon.connection(0)).socket.destroy();
    const error = await run.result.catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE', message: expect.stringContaining('1 reconnect attempt failed') });
    expect((error as Error).message).toContain('99.0.0');
    expect(daemon.connections).toHaveLength(2);
  });

  it('without reconnect a loss fails the runs as before, and says so in a disconnected event', async () => {
    const daemon = await FakeDaemon.start({ providers: [descriptor('spawn')] });
    cleanup.push(() => daemon.close());
    const service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
    cleanup.push(() => service.close());
    const run = await service.start('spawn', request());
    const disconnected = next(service, 'disconnected');
    (await daemon.connection()).socket.destroy();
    expect(await disconnected).toMatchObject({ reconnecting: false });
    await expect(run.result).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    await delay(50);
    expect(daemon.connections).toHaveLength(1);
  });
});

describe('reconnect policy', () => {
  it('defaults, overrides, and refuses nonsense before dialling', async () => {
    expect(reconnectPolicy(undefined)).toBeUndefined();
    expect(reconnectPolicy(false)).toBeUndefined();
    expect(reconnectPolicy(true)).toEqual({ maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5000 });
    expect(reconnectPolicy({ maxAttempts: 3 })).toEqual({ maxAttempts: 3, initialDelayMs: 100, maxDelayMs: 5000 });
    expect(() => reconnectPolicy({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => reconnectPolicy({ initialDelayMs: -1 })).toThrow(RangeError);
    expect(() => reconnectPolicy({ initialDelayMs: 500, maxDelayMs: 100 })).toThrow(RangeError);
    await expect(connect({ socket: '/nonexistent/daemon.sock', reconnect: { maxAttempts: 1.5 } })).rejects.toThrow(RangeError);
  });

  it('backs off exponentially, capped, with jitter in the upper half', () => {
    const policy = { maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5000 };
    const low = Array.from({ length: 10 }, (_, i) => backoffDelay(policy, i + 1, () => 0));
    const high = Array.from({ length: 10 }, (_, i) => backoffDelay(policy, i + 1, () => 1));
    expect(high).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]);
    expect(low).toEqual(high.map((ms) => ms / 2));
    expect(backoffDelay(policy, 1000, () => 1)).toBe(5000);
  });
});
