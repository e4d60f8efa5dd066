/**
 * The daemon's poll spin (daemon/connection/poll-spin.ts) as configured: `pollSpinMicros` reaches
 * the connections of a real daemon process, whose status and `daemon stopped` log line report what it spun.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const parent = { sessionId: 'parent-1', cwd: '/tmp' };
let daemon: DaemonProcess | undefined;

afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
});

/** Sequential runs over one connection: start, wait, dispose, as a harness working through a list. */
async function runs(socket: string, count: number): Promise<void> {
  const peer = await RawPeer.initialized(socket);
  for (let i = 0; i < count; i++) {
    const start = await peer.request('subagent/start', { provider: 'echo', prompt: [{ type: 'text', text: `run ${i}` }], parent });
    const { runId } = start.result as { runId: string };
    expect((await peer.request('run/wait', { runId })).result).toMatchObject({ stopReason: 'completed' });
    expect((await peer.request('run/dispose', { runId })).error).toBeUndefined();
  }
  peer.close();
}

/** SIGTERM, then the `daemon stopped` line of its log. */
async function stoppedLine(running: DaemonProcess): Promise<Record<string, unknown>> {
  const exited = once(running.proc, 'exit');
  running.proc.kill('SIGTERM');
  await exited;
  const lines = readFileSync(join(running.stateDir, 'daemon.log'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const stopped = lines.find((line) => line.msg === 'daemon stopped');
  expect(stopped).toBeDefined();
  return stopped!;
}

describe('pollSpinMicros', () => {
  it('a daemon that spins catches a client talking within its window', async () => {
    // A window far wider than this client's pause between requests: every run's next message lands in it.
    daemon = await startDaemon({ pollSpinMicros: 10_000 });
    await runs(daemon.socket, 20);
    const peer = await RawPeer.initialized(daemon.socket);
    const status = (await peer.request('daemon/status', {})).result as { pollSpin?: { windowMicros: number; windows: number; caught: number } };
    peer.close();
    expect(status.pollSpin).toMatchObject({ windowMicros: 10_000 });
    expect(status.pollSpin!.caught).toBeGreaterThanOrEqual(1);
    const { pollSpin } = (await stoppedLine(daemon)) as { pollSpin?: { windows: number; caught: number; spunMs: number } };
    expect(pollSpin).toBeDefined();
    expect(pollSpin!.windows).toBeGreaterThanOrEqual(1);
    expect(pollSpin!.caught).toBeGreaterThanOrEqual(1);
    expect(pollSpin!.spunMs).toBeGreaterThan(0);
  }, 30_000);

  it('0 turns it off', async () => {
    daemon = await startDaemon({ pollSpinMicros: 0 });
    await runs(daemon.socket, 3);
    const peer = await RawPeer.initialized(daemon.socket);
    expect((await peer.request('daemon/status', {})).result).not.toHaveProperty('pollSpin');
    peer.close();
    expect(await stoppedLine(daemon)).not.toHaveProperty('pollSpin');
  }, 30_000);

  it('a value past 10 ms is refused at start, naming the key', async () => {
    await expect(startDaemon({ pollSpinMicros: 50_000 })).rejects.toThrow(/pollSpinMicros/);
  }, 30_000);
});
