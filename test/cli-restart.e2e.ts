/**
 * `restart` and `stop` hand over reliably (issue #10 item 4): `stop` returns only once the old
 * process has exited, so its socket and state-dir lock are free; `restart` then leaves exactly one
 * daemon serving, whoever is connected: an owner with a run in flight, and a client that reads
 * nothing while its replies pile up. Twenty times in a row, and no run is lost. And a child that
 * the next daemon continues streams its events to the owner that re-attached.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../client/index.js';
import type { RunEvent, RunInfo } from '../protocol/index.js';
import { CliSandbox, daemonPidsFor, pidAlive } from './support/cli-harness.js';
import { RawPeer } from './support/raw-peer.js';

const RESTARTS = 20;

describe('restart with an owner and a non-reading client connected', () => {
  let box: CliSandbox;
  const peers: RawPeer[] = [];
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-restart-');
  });
  afterAll(async () => {
    for (const peer of peers) peer.close();
    await box.cleanup();
  });

  it(`leaves exactly one daemon serving, ${RESTARTS} times, and loses no run`, { timeout: 300_000 }, async () => {
    // Each run is still working when its restart drains the daemon; the drain lets it finish.
    const script = box.file('slow.json', { steps: [{ delayMs: 400, text: 'done across a restart', finish: 'stop' }] });
    const start = await box.run(['start', '--json']);
    expect(start.code, start.stderr).toBe(0);
    let pid = (JSON.parse(start.stdout) as { pid: number }).pid;
    const started: string[] = [];

    for (let i = 0; i < RESTARTS; i++) {
      const owner = await RawPeer.initialized(box.socket, `owner-${i}`);
      peers.push(owner);
      const reply = await owner.request('subagent/start', {
        provider: 'spawn',
        prompt: [{ type: 'text', text: `task ${i}` }],
        parent: { sessionId: `restart-${i}`, cwd: box.work },
        agentOptions: { model: `scripted:${script}` },
      });
      expect(reply.error, JSON.stringify(reply.error)).toBeUndefined();
      started.push((reply.result as { runId: string }).runId);

      // A client that stops reading, with a pile of requests whose replies it never takes.
      const lazy = await RawPeer.initialized(box.socket, `lazy-${i}`);
      peers.push(lazy);
      lazy.socket.pause();
      for (let n = 0; n < 300; n++) lazy.send({ jsonrpc: '2.0', id: 1000 + n, method: 'runs/list', params: {} });

      const restart = await box.run(['restart', '--json', '--timeout', '20'], { timeoutMs: 60_000 });
      expect(restart.code, `restart ${i}: ${restart.stdout}${restart.stderr}`).toBe(0);
      const out = JSON.parse(restart.stdout) as { stopped: { pid: number }; started: { pid: number } };
      expect(out.stopped.pid).toBe(pid);
      expect(pidAlive(pid), `restart ${i}: the old daemon is gone`).toBe(false);
      const daemons = daemonPidsFor(box.socket);
      expect(daemons, `restart ${i}`).toEqual([out.started.pid]);
      pid = out.started.pid;
      const probe = await RawPeer.initialized(box.socket, `probe-${i}`);
      peers.push(probe);
      const status = await probe.request('daemon/status', {});
      expect(status.result).toMatchObject({ daemon: { pid } });
      probe.close();
      owner.close();
      lazy.close();
    }

    const runs = await box.run(['runs', '--json']);
    expect(runs.code, runs.stderr).toBe(0);
    const byId = new Map((JSON.parse(runs.stdout) as RunInfo[]).map((r) => [r.runId, r]));
    for (const id of started) expect(byId.get(id)?.stopReason, id).toBe('completed');
    expect(started).toHaveLength(RESTARTS);

    const stop = await box.run(['stop', '--json']);
    expect(stop.code, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout)).toEqual({ stopped: { pid } });
    // stop returned: the process, the socket and the lock are already gone (no waiting here).
    expect(pidAlive(pid)).toBe(false);
    expect(existsSync(box.socket)).toBe(false);
    expect(existsSync(join(box.stateDir, 'daemon.lock'))).toBe(false);
  });
});

describe('a streamed child continued across a restart', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-restart-stream-');
  });
  afterAll(() => box.cleanup());

  it('streams run/event to its re-attached owner from the next daemon', { timeout: 120_000 }, async () => {
    // The model answers after a pause: the drain times out first and checkpoints the child.
    const script = box.file('slow.json', { steps: [{ delayMs: 4000, text: 'continued answer', finish: 'stop' }] });
    expect((await box.run(['start'])).code).toBe(0);
    const client = await connect({ socket: box.socket, reconnect: { maxAttempts: 100 }, logger: { error: () => undefined, warn: () => undefined } });
    try {
      const firstEpoch = client.daemon.epoch;
      const events: Array<{ epoch: string; event: RunEvent }> = [];
      const run = await client.start('spawn', {
        prompt: [{ type: 'text', text: 'take your time' }],
        parent: { sessionId: 'stream-across-restart', cwd: box.work },
        agentOptions: { model: `scripted:${script}` },
        signal: AbortSignal.timeout(100_000),
        onEvent: (event) => void events.push({ epoch: client.daemon.epoch, event }),
      });
      const restart = await box.run(['restart', '--timeout', '1'], { timeoutMs: 60_000 });
      expect(restart.code, restart.stderr).toBe(0);
      const result = await run.result;
      expect(result.stopReason).toBe('completed');
      expect(client.daemon.epoch).not.toBe(firstEpoch);
      const after = events.filter((e) => e.epoch !== firstEpoch).map((e) => e.event);
      expect(after.filter((e) => e.kind === 'text-delta').map((e) => (e as { text: string }).text).join('')).toContain('continued answer');
      await run.dispose();
    } finally {
      await client.close();
    }
  });
});
