/**
 * `connect({ socket, reconnect })` against real daemon processes: a connection cut under a live
 * daemon (through a proxy the test severs), a daemon killed with SIGKILL and restarted on the
 * same socket and state dir, and a daemon that never comes back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  connect,
  type ClientStartRequest,
  type SubagentEndEvent,
} from '../client/index.js';
import { restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { captureLogger } from './support/fake-daemon-peer.js';
import { SocketProxy, killHard, next, track, within } from './support/reconnect-harness.js';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => undefined);
  cleanup = [];
});

function request(text: string): ClientStartRequest {
  return { prompt: [{ type: 'text', text }], signal: new AbortController().signal, parent: { sessionId: 'parent-1', cwd: '/tmp' } };
}


describe('reconnect against a real daemon', { timeout: 10_000 }, () => {
  it('a connection cut under a live daemon: the steer run is re-attached, sendMessage reaches it, result completes', async () => {
    const daemon = await startDaemon({ detachGraceMs: 30_000 });
    cleanup.push(() => daemon.stop());
    const proxy = await SocketProxy.start(daemon.socket);
    cleanup.push(() => proxy.close());
    const logger = captureLogger();
    const service = await connect({
      socket: proxy.socket,
      logger,
      reconnect: { maxAttempts: 5, initialDelayMs: 20, maxDelayMs: 200 },
    });
    cleanup.push(() => service.close());
    const epoch = service.daemon.epoch;
    const run = await service.start('echo', request('steer'));
    const result = track(run.result);
    const disconnected = next(service, 'disconnected');
    const reconnected = next(service, 'reconnected');

    proxy.sever();
    const lost = await within(disconnected, 2000, 'the disconnected event');
    expect(lost.reconnecting).toBe(true);
    expect(lost.error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect(result.settled).toBe(false);

    const back = await within(reconnected, 5000, 'the reconnected event');
    expect(back).toMatchObject({ epoch, restarted: false });
    expect(proxy.accepted).toBe(2);
    expect(service.disconnected).toBeUndefined();
    expect(result.settled).toBe(false);
    // The daemon hands the run to the new connection.
    const listed = await service.ops.runs();
    expect(listed.find((info) => info.runId === run.id)).toMatchObject({ state: 'running', mine: true });

    run.sendMessage?.([{ type: 'text', text: 'after the gap' }]);
    await expect(within(run.result, 3000, 'the steered result')).resolves.toMatchObject({
      stopReason: 'completed',
      output: [{ type: 'text', text: 'after the gap' }],
    });
    // New runs work on the new connection, and dispose of the re-attached one reaches the daemon.
    const fresh = await service.start('echo', request('echo fresh'));
    await expect(within(fresh.result, 3000, 'a new run')).resolves.toMatchObject({ stopReason: 'completed' });
    await expect(run.dispose()).resolves.toBeUndefined();
    await expect(fresh.dispose()).resolves.toBeUndefined();
    expect(logger.lines.filter((line) => !/vscode-jsonrpc|error on the connection/.test(line))).toEqual([]);
  });

  it('a daemon killed with SIGKILL and restarted: the run resolves as interrupted, reconnected says restarted', async () => {
    const daemon = await startDaemon();
    let restarted: DaemonProcess | undefined;
    // The restarted daemon first (the temp dir is the original's), after the service closed.
    cleanup.push(async () => {
      await restarted?.stop();
      await daemon.stop();
    });
    const logger = captureLogger();
    const service = await connect({
      socket: daemon.socket,
      logger,
      reconnect: { maxAttempts: 50, initialDelayMs: 50, maxDelayMs: 150 },
    });
    cleanup.push(() => service.close());
    const epoch = service.daemon.epoch;
    const ends: SubagentEndEvent[] = [];
    service.on('subagent/end', (event) => void ends.push(event));
    const run = await service.start('echo', request('hang'));
    const result = track(run.result);
    const reconnected = next(service, 'reconnected');
    const deadPid = daemon.proc.pid;

    await killHard(daemon.proc);
    restarted = await restartDaemon(daemon);
    expect(result.settled).toBe(false);

    const back = await within(reconnected, 6000, 'the reconnected event');
    expect(back.restarted).toBe(true);
    expect(back.epoch).not.toBe(epoch);
    expect(service.daemon).toMatchObject({ epoch: back.epoch, pid: restarted.proc.pid });
    const settled = await within(run.result, 2000, 'the interrupted result');
    expect(settled.stopReason).toBe('error');
    expect(settled.diagnostic).toMatch(/interrupted/);
    expect(settled.diagnostic).toContain(`pid ${deadPid}`);
    // Lifecycle listeners hear of the end they missed.
    expect(ends).toContainEqual(expect.objectContaining({ runId: run.id, stopReason: 'error' }));
    // The providers come from the new daemon, and starts go to it.
    expect(service.list()).toEqual(expect.arrayContaining(['echo', 'bare']));
    const fresh = await service.start('echo', request('echo again'));
    await expect(within(fresh.result, 3000, 'a new run')).resolves.toMatchObject({ stopReason: 'completed' });
    await fresh.dispose();
  });

  it('a daemon that never comes back: after maxAttempts the result rejects DAEMON_UNAVAILABLE, in bounded time', async () => {
    const daemon = await startDaemon();
    cleanup.push(() => daemon.stop());
    const logger = captureLogger();
    const service = await connect({
      socket: daemon.socket,
      logger,
      reconnect: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 100 },
    });
    cleanup.push(() => service.close());
    let reconnects = 0;
    service.on('reconnected', () => void (reconnects += 1));
    const run = await service.start('echo', request('hang'));
    const disconnected = next(service, 'disconnected');

    await killHard(daemon.proc);
    const since = Date.now();
    await within(disconnected, 2000, 'the disconnected event');
    const error = await within(
      run.result.then(
        () => new Error('expected a rejection'),
        (failure: unknown) => failure,
      ),
      3000,
      'the rejection',
    );
    const elapsed = Date.now() - since;
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect((error as Error).message).toContain(daemon.socket);
    expect((error as Error).message).toContain('3 reconnect attempts failed');
    // It waited out the backoff (each wait is at least half its nominal 50, 100, 100 ms) …
    expect(elapsed).toBeGreaterThanOrEqual(100);
    // … and no longer.
    expect(elapsed).toBeLessThan(2000);
    expect(logger.lines.filter((line) => line.includes('reconnect attempt'))).toHaveLength(3);
    expect(reconnects).toBe(0);
    expect(service.disconnected).toBe(error);
    await expect(service.start('echo', request('echo x'))).rejects.toBe(error);
  });
});
