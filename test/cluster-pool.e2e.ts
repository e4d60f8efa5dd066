/**
 * Several real daemons (the built CLI) on one real nats-server form one pool: the cap held
 * cluster-wide from the daemons' own records, runs submitted through one member executed by the
 * others, kill -9 of the executing member with the run completed elsewhere, a run whose provider
 * cannot migrate ending `error` saying so, NATS unreachable at start, and NATS lost while running.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { SubagentResult } from '../protocol/index.js';
import { clusterScene, peakOf, startWhenOnline, untilMemberOffline } from './support/cluster-scene.js';
import { CLI, type DaemonProcess } from './support/daemon-process.js';
import { freePort } from './support/wire-peers.js';

const scene = clusterScene();
const { clients, records } = scene;

/** A member whose children each take one scripted step of `delayMs` with a tool call, then answer "done". */
function member(options: { cap: number; delayMs: number; slots?: number; ackWaitMs?: number; nats?: string }): Promise<DaemonProcess> {
  return scene.member(
    { model: { default: scene.scriptedModel(options.delayMs) }, limits: { maxConcurrentRuns: options.cap } },
    { nats: options.nats, ackWaitMs: options.ackWaitMs ?? 1000, slots: options.slots },
  );
}

const parent = { sessionId: 'cluster-test', cwd: process.cwd() };

/**
 * The failover scene: a front member that executes nothing (slots 0, so the run must live
 * elsewhere) and the member that takes the run, whose child exists once this resolves.
 */
async function runOnDoomedMember(provider: string, text: string, delayMs: number) {
  const front = await member({ cap: 2, delayMs, slots: 0 });
  const doomed = await member({ cap: 2, delayMs });
  const store = await records();
  const service = await clients.connect(front.socket);
  const run = await service.start(provider, { prompt: [{ type: 'text', text }], parent, signal: AbortSignal.timeout(60_000) });
  const runId = run.id;
  await waitUntil(() => store.seen(runId)?.record.childId !== undefined, 10_000);
  return { run, runId, store, doomed };
}

describe('a pool of daemons on one nats-server', () => {
  it('two daemons run 100 runs from 5 clients; the cluster-wide cap is never exceeded and both members execute', async () => {
    const cap = 3;
    // Each member would run 3 at once on its own: 6 without the shared cap.
    const a = await member({ cap, delayMs: 40 });
    const b = await member({ cap, delayMs: 40 });
    const sockets = [a.socket, a.socket, a.socket, b.socket, b.socket];
    const services = await Promise.all(sockets.map((socket) => clients.connect(socket)));
    const results = await Promise.all(
      services.flatMap((service, client) =>
        Array.from({ length: 20 }, async () => {
          const run = await service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent: { ...parent, sessionId: `client-${client}` }, signal: AbortSignal.timeout(60_000) });
          const result = await run.result;
          await run.dispose();
          return { runId: run.id, result };
        }),
      ),
    );
    expect(results).toHaveLength(100);
    for (const { result } of results) expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });

    const store = await records();
    const ids = new Set(results.map((r) => r.runId));
    const mine = [...store.all()].map((r) => r.record).filter((r) => ids.has(r.runId));
    expect(mine).toHaveLength(100);
    // Running intervals from the records the members wrote: claimed → settled.
    const peak = peakOf(mine);
    expect(peak).toBeLessThanOrEqual(cap);
    expect(peak).toBeGreaterThan(1);
    const workers = new Set(mine.map((r) => r.worker!.id));
    expect(workers.size).toBe(2);
    // Work spreads: runs submitted through one member were executed by the other.
    expect(mine.some((r) => r.ownerMember !== r.worker!.id)).toBe(true);
    expect(mine.every((r) => r.state === 'settled' && r.attempt === 1)).toBe(true); // read from the bucket: disposes are told, not stored
  }, 90_000);

  it('kill -9 of the executing member: after the lease another member resumes the spawn run and the owner gets its real outcome', async () => {
    // Mid-step: the model's first answer takes 2.5 s.
    const { run, runId, store, doomed } = await runOnDoomedMember('spawn', 'go', 2500);
    const first = store.seen(runId)!.record;
    expect(first.worker?.pid).toBe(doomed.proc.pid);
    doomed.proc.kill('SIGKILL');
    const heir = await member({ cap: 2, delayMs: 200 });
    const result: SubagentResult = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const final = (await store.get(runId))!.record;
    expect(final.worker?.pid).toBe(heir.proc.pid);
    // One takeover; more only if the heir stalled past its own 1 s lease on a loaded machine and took its run back.
    expect(final.attempt).toBeGreaterThanOrEqual(2);
    expect(final.childId).toBe(first.childId);
    await run.dispose();
  }, 60_000);

  it('a run whose provider cannot restore its child does not migrate: it ends error, saying so', async () => {
    const { run, doomed } = await runOnDoomedMember('echo', 'hang', 100);
    doomed.proc.kill('SIGKILL');
    await member({ cap: 2, delayMs: 100 });
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/cannot migrate/);
    expect(result.diagnostic).toContain(String(doomed.proc.pid));
  }, 60_000);

  it('a partitioned member stops its child when its lease lapses; another member takes the run over, fenced by revision', async () => {
    const proxy = await tcpProxy(scene.nats().port);
    try {
      const front = await member({ cap: 2, delayMs: 3000, slots: 0 });
      const cut = await member({ cap: 2, delayMs: 3000, nats: `nats://127.0.0.1:${proxy.port}` });
      const store = await records();
      const service = await clients.connect(front.socket);
      const run = await service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(60_000) });
      await waitUntil(() => store.seen(run.id)?.record.childId !== undefined, 10_000);
      expect(store.seen(run.id)!.record.worker?.pid).toBe(cut.proc.pid);
      const heir = await member({ cap: 2, delayMs: 200 });
      proxy.partition();
      const result = await run.result;
      expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
      const final = (await store.get(run.id))!.record;
      expect(final.worker?.pid).toBe(heir.proc.pid);
      expect(final.attempt).toBeGreaterThanOrEqual(2); // as above: the heir may take its own run back after a stall
      // The cut member stopped its child before the heir claimed the run: never two at once.
      const letGo = readFileSync(join(cut.stateDir, 'daemon.log'), 'utf8')
        .split('\n')
        .filter((line) => line.includes('letting go of a run: its lease lapsed'))
        .map((line) => JSON.parse(line) as { time: number; runId: string });
      expect(letGo.map((line) => line.runId)).toEqual([run.id]);
      expect(letGo[0]!.time).toBeLessThanOrEqual(Date.parse(final.claimedAt!));
      // Healed, the member rejoins; its stale revision could not have overwritten the heir's record.
      proxy.heal();
      expect((await store.get(run.id))!.record.worker?.pid).toBe(heir.proc.pid);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('NATS unreachable at start: the daemon says so and exits non-zero', async () => {
    const port = await freePort();
    const dir = scene.dir();
    const child = spawn(process.execPath, [CLI, 'daemon', '--socket', join(dir, 'd.sock'), '--state-dir', join(dir, 'state'), '--nats', `nats://127.0.0.1:${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '', HOME: dir },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain(`cannot reach the cluster's NATS server at nats://127.0.0.1:${port}`);
  }, 30_000);

  it('NATS lost while running: the member keeps its running child, refuses new runs with CLUSTER_UNAVAILABLE, and takes them again after reconnecting', async () => {
    const a = await member({ cap: 2, delayMs: 1500, ackWaitMs: 15_000 });
    const service = await clients.connect(a.socket);
    const store = await records();
    const running = await service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(60_000) });
    const runId = running.id;
    await waitUntil(() => store.seen(runId)?.record.childId !== undefined, 10_000);
    await scene.nats().halt();
    await untilMemberOffline(a);
    const refused = await service
      .start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(10_000) })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
    await scene.nats().restart();
    // The child ran on through the outage (well inside its lease) and its outcome was recorded.
    expect(await running.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const again = await startWhenOnline(() => service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(30_000) }));
    expect(await again.result).toMatchObject({ stopReason: 'completed' });
  }, 60_000);
});

/** A TCP relay to the NATS port that can cut every connection through it and refuse new ones. */
async function tcpProxy(target: number): Promise<{ port: number; partition(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((inbound) => {
    if (cut) return inbound.destroy();
    const outbound = tcpConnect(target, '127.0.0.1');
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    partition() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      cut = false;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitUntil(check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
