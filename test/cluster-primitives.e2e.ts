/**
 * The JetStream primitives of the cluster (daemon/cluster/) against a real nats-server: the
 * connection and its errors, the slot queue's cluster-wide cap, lease heartbeats, redelivery
 * after a SIGKILLed worker process, compare-and-set records and the writes under them
 * (kv-writes.ts: revisions, refusals, a missing bucket, a server that does not answer), session
 * events, fairness across clients, and a server restart keeping queue and records.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import type { ClusterRun, WorkerRef } from '../daemon/cluster/cluster-run.js';
import { KvWrites } from '../daemon/cluster/kv-writes.js';
import { clusterNames } from '../daemon/cluster/names.js';
import { NatsLink } from '../daemon/cluster/nats-link.js';
import { RunRecords } from '../daemon/cluster/run-records.js';
import { ClusterScheduler } from '../daemon/cluster/scheduler.js';
import { SessionEvents } from '../daemon/cluster/session-events.js';
import { SlotQueue } from '../daemon/cluster/slot-queue.js';
import { join } from 'node:path';
import { REPO } from './support/daemon-process.js';
import { startNatsServer, type NatsServer } from './support/nats-server.js';
import { freePort } from './support/wire-peers.js';

const names = clusterNames('t');
let server: NatsServer;
const links: NatsLink[] = [];
const cleanups: Array<() => void> = [];

beforeEach(async () => {
  server = await startNatsServer();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  await Promise.allSettled(links.splice(0).map((link) => link.close()));
  await server.stop();
});

async function link(name = 'test'): Promise<NatsLink> {
  const opened = await NatsLink.open(server.url, { name });
  links.push(opened);
  return opened;
}

async function member(id: string, cap: number, ackWaitMs = 5000): Promise<ClusterScheduler> {
  const l = await link(id);
  const records = await RunRecords.open<ClusterRun>(l, names.recordsBucket);
  cleanups.push(() => records.close());
  const queue = await SlotQueue.open(l, names, { cap, ackWaitMs });
  const worker: WorkerRef = { id, host: 'localhost', pid: process.pid };
  return new ClusterScheduler(records, queue, worker);
}

let serial = 0;
function queuedRun(owner: string): ClusterRun {
  serial += 1;
  return {
    runId: `run_${owner}_${serial}`,
    owner,
    ownerMember: 'm0',
    provider: 'spawn',
    state: 'queued',
    queuedAt: new Date().toISOString(),
    request: { prompt: [{ type: 'text', text: `task ${serial}` }], parent: { sessionId: 's', cwd: '/' }, childDepth: 1 },
    attempt: 0,
  };
}

/** Completes a claim: record settled (CAS), ticket acknowledged. */
async function finish(scheduler: ClusterScheduler, claim: NonNullable<Awaited<ReturnType<ClusterScheduler['next']>>>): Promise<void> {
  await scheduler.records.transition(claim.run.runId, { ...claim.run, state: 'settled', settledAt: new Date().toISOString() }, claim.revision);
  await claim.lease.ack();
}

describe('cluster primitives on a real nats-server', () => {
  it('an unreachable server is a clear CLUSTER_UNAVAILABLE naming the URL', async () => {
    const port = await freePort();
    const error = await NatsLink.open(`nats://127.0.0.1:${port}`, { name: 'nobody', connectTimeoutMs: 1000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SubagentError);
    expect((error as SubagentError).code).toBe('CLUSTER_UNAVAILABLE');
    expect((error as SubagentError).message).toContain(`127.0.0.1:${port}`);
  });

  it('a lost connection turns the link offline (admissions refused, typed) and back online at reconnect', async () => {
    const l = await link();
    const changes: boolean[] = [];
    l.onChange((online) => changes.push(online));
    await server.halt();
    await waitUntil(() => !l.online, 10_000);
    expect(() => l.assertOnline()).toThrow(expect.objectContaining({ code: 'CLUSTER_UNAVAILABLE' }));
    await server.restart();
    await waitUntil(() => l.online, 10_000);
    expect(changes).toEqual([false, true]);
    expect(() => l.assertOnline()).not.toThrow();
  });

  it('members starting together all open the one records bucket (no "subjects overlap")', async () => {
    const links = await Promise.all(['s1', 's2', 's3', 's4', 's5', 's6'].map((id) => link(id)));
    // The window is one round trip wide (look, then add); several fresh buckets make it likely.
    for (let round = 0; round < 8; round++) {
      const opened = await Promise.all(links.map((l) => RunRecords.open<ClusterRun>(l, `racing_open_${round}`)));
      for (const records of opened) cleanups.push(() => records.close());
      const run = queuedRun('racer');
      await opened[0]!.create(run);
      for (const records of opened) expect((await records.get(run.runId))?.record.runId).toBe(run.runId);
    }
  });

  it('max_ack_pending holds the cap cluster-wide: 20 clients, 4 greedy members, never more than 3 at once', async () => {
    const cap = 3;
    const members = await Promise.all([0, 1, 2, 3].map((i) => member(`m${i}`, cap)));
    const clients = await Promise.all(Array.from({ length: 20 }, (_, i) => member(`c${i}`, cap)));
    const submitted = (await Promise.all(clients.map((c, i) => Promise.all([0, 1, 2].map(() => c.submit(queuedRun(`owner${i}`))))))).flat();
    expect(submitted).toHaveLength(60);
    let inFlight = 0;
    let peak = 0;
    const done = new Set<string>();
    const stop = new AbortController();
    // Each member tries to run 3 at once: 12 would be possible without the server's cap.
    const loops = members.flatMap((m) =>
      [0, 1, 2].map(async () => {
        while (!stop.signal.aborted) {
          const claim = await m.next(stop.signal);
          if (!claim) return;
          inFlight += 1;
          peak = Math.max(peak, inFlight);
          await new Promise((resolve) => setTimeout(resolve, 20));
          inFlight -= 1;
          expect(done.has(claim.run.runId)).toBe(false);
          done.add(claim.run.runId);
          await finish(m, claim);
          if (done.size === 60) stop.abort();
        }
      }),
    );
    await Promise.race([Promise.all(loops), timeout(25_000, () => `only ${done.size} of 60 runs completed`)]);
    stop.abort();
    expect(done.size).toBe(60);
    expect(peak).toBe(cap);
  });

  it('a heartbeated lease outlives ack_wait: nobody else gets the ticket while working() keeps coming', async () => {
    const a = await member('a', 1, 1000);
    const b = await member('b', 1, 1000);
    await a.submit(queuedRun('o'));
    const claim = (await a.next(AbortSignal.timeout(5000)))!;
    claim.lease.keepAlive(() => expect.fail('the lease lapsed while heartbeating'));
    // 3.5 x ack_wait: without heartbeats the server would redeliver three times over.
    const stolen = await b.queue.take(3500);
    expect(stolen).toBeUndefined();
    expect(claim.lease.deliveries).toBe(1);
    await finish(a, claim);
    expect(await b.queue.depth()).toEqual({ leased: 0, waiting: 0 });
  });

  it('a SIGKILLed worker process: its ticket is redelivered after ack_wait and the run is taken over by revision', async () => {
    const survivor = await member('survivor', 2, 1000);
    const run = queuedRun('o');
    await survivor.submit(run);
    const worker = spawn(process.execPath, ['--input-type=module', '-e', workerScript(server.url)], { stdio: ['ignore', 'pipe', 'pipe'] });
    cleanups.push(() => worker.kill('SIGKILL'));
    let stderr = '';
    worker.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const line = await Promise.race([firstLine(worker.stdout), timeout(10_000, () => `worker said nothing: ${stderr}`)]);
    expect(line).toBe(`claimed ${run.runId}`);
    const claimedByWorker = (await survivor.records.get(run.runId))!;
    expect(claimedByWorker.record.worker?.id).toBe('doomed');
    worker.kill('SIGKILL');
    const claim = (await survivor.next(AbortSignal.timeout(10_000)))!;
    expect(claim.takeover).toBe(true);
    expect(claim.lease.deliveries).toBe(2);
    expect(claim.run.runId).toBe(run.runId);
    expect(claim.run.worker?.id).toBe('survivor');
    expect(claim.run.attempt).toBe(2);
    // The dead worker's revision is stale now: it could not write over the takeover.
    const stale = await survivor.records.transition(run.runId, { ...claimedByWorker.record, state: 'settled' }, claimedByWorker.revision).catch((e: unknown) => e);
    expect((stale as SubagentError).code).toBe('REVISION_CONFLICT');
    await finish(survivor, claim);
  });

  it('two members racing for one record: exactly one transition wins, the other is REVISION_CONFLICT', async () => {
    const a = await member('a', 1);
    const b = await member('b', 1);
    const run = queuedRun('o');
    const { revision } = await a.records.create(run);
    expect(await b.records.create(run).catch((e: unknown) => (e as SubagentError).code)).toBe('REVISION_CONFLICT');
    for (let round = 0; round < 5; round++) {
      const current = (await a.records.get(run.runId))!;
      const outcomes = await Promise.allSettled([
        a.records.transition(run.runId, { ...current.record, worker: { id: 'a', host: 'h', pid: 1 } }, current.revision),
        b.records.transition(run.runId, { ...current.record, worker: { id: 'b', host: 'h', pid: 2 } }, current.revision),
      ]);
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      const lost = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect((lost.reason as SubagentError).code).toBe('REVISION_CONFLICT');
    }
    expect((await a.records.get(run.runId))!.revision).toBeGreaterThan(revision);
  });

  it('KV writes straight to the subjects: revisions as the server numbers them, a stale one refused with code 10071, no bucket and no answer rejected', async () => {
    const l = await link('writer');
    const records = await RunRecords.open<{ runId: string; n: number }>(l, 'T_WRITES');
    cleanups.push(() => records.close());
    const writes = new KvWrites(l.nc, 'T_WRITES', 1000);
    cleanups.push(() => writes.close());
    const first = await writes.write('run.a', JSON.stringify({ runId: 'a', n: 1 }), 0);
    const second = await writes.write('run.a', JSON.stringify({ runId: 'a', n: 2 }), first);
    expect(second).toBeGreaterThan(first);
    expect(await records.get('a')).toEqual({ record: { runId: 'a', n: 2 }, revision: second });
    await expect(writes.write('run.a', JSON.stringify({ runId: 'a', n: 3 }), first)).rejects.toMatchObject({ code: 10071 });
    await expect(writes.write('run.a', JSON.stringify({ runId: 'a', n: 3 }), 0)).rejects.toMatchObject({ code: 10071 });
    // Through the records: the same refusal is REVISION_CONFLICT.
    await expect(records.transition('a', { runId: 'a', n: 3 }, first)).rejects.toMatchObject({ code: 'REVISION_CONFLICT' });
    const missing = new KvWrites(l.nc, 'NO_SUCH_BUCKET', 1000);
    cleanups.push(() => missing.close());
    await expect(missing.write('run.a', '{}', 0)).rejects.toThrow(/no responders/);
    // A server that does not answer: the write is rejected after its timeout, not held forever.
    await server.halt(true);
    await expect(writes.write('run.b', '{}', 0)).rejects.toThrow(/timeout/);
  });

  it('session events come back in order, a re-published line stored once', async () => {
    const l = await link();
    const events = await SessionEvents.open(l, names);
    const lines = [{ id: 'child' }, { type: 'user/message' }, { type: 'assistant/message' }, { type: 'usage' }, { type: 'turn/end' }];
    for (const [i, line] of lines.entries()) await events.append('run_x', i, line);
    await events.append('run_x', 2, lines[2]); // a retry after a lost ack
    await events.append('run_y', 0, { id: 'other' });
    expect(await events.readAll('run_x')).toEqual(lines);
    expect(await events.readAll('run_nothing')).toEqual([]);
  });

  it('fairness: a client that floods the queue gets one slot in turn with every other waiting client', async () => {
    const m = await member('m', 2);
    for (let i = 0; i < 20; i++) await m.submit(queuedRun('flood'));
    for (const owner of ['b', 'c', 'd', 'e']) for (let i = 0; i < 4; i++) await m.submit(queuedRun(owner));
    await waitUntil(() => [...m.records.all()].length === 36, 5000);
    const order: string[] = [];
    const stop = new AbortController();
    const loops = [0, 1].map(async () => {
      while (order.length < 36) {
        const claim = await m.next(stop.signal);
        if (!claim) return;
        order.push(claim.run.owner);
        await new Promise((resolve) => setTimeout(resolve, 5));
        await finish(m, claim);
        if (order.length === 36) stop.abort();
      }
    });
    await Promise.race([Promise.all(loops), timeout(20_000, () => `claimed ${order.length} of 36`)]);
    stop.abort();
    // Although 20 of the flood's runs were queued first, clients take turns: at every point of the
    // first 20 claims no client is more than 2 ahead of another (two claimers race, so one turn may
    // interleave), and every other client's last run goes by claim 22 (FIFO would give it 36).
    const owners = ['flood', 'b', 'c', 'd', 'e'];
    for (let k = 1; k <= 20; k++) {
      const counts = owners.map((owner) => order.slice(0, k).filter((o) => o === owner).length);
      expect(Math.max(...counts) - Math.min(...counts), `after ${k} claims: ${order.slice(0, k).join(' ')}`).toBeLessThanOrEqual(2);
    }
    expect(Math.max(...owners.slice(1).map((owner) => order.lastIndexOf(owner)))).toBeLessThan(22);
  });

  it('a server restart on the same store keeps queued tickets and records', async () => {
    const before = await member('m', 2);
    const runs = [queuedRun('o'), queuedRun('o'), queuedRun('p')];
    for (const run of runs) await before.submit(run);
    await Promise.all(links.splice(0).map((l) => l.close()));
    for (const cleanup of cleanups.splice(0)) cleanup();
    await server.restart();
    const after = await member('m2', 2);
    expect((await after.records.get(runs[2]!.runId))?.record.state).toBe('queued');
    const claimed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const claim = (await after.next(AbortSignal.timeout(5000)))!;
      claimed.push(claim.run.runId);
      await finish(after, claim);
    }
    expect(claimed.sort()).toEqual(runs.map((r) => r.runId).sort());
    expect(await after.queue.depth()).toEqual({ leased: 0, waiting: 0 });
  });
});

/** A separate worker process: claims one run with heartbeats on, says so, then waits to be killed. */
function workerScript(url: string): string {
  const dist = `${join(REPO, 'dist', 'daemon', 'cluster')}/`;
  return `
    import { NatsLink } from '${dist}nats-link.js';
    import { clusterNames } from '${dist}names.js';
    import { RunRecords } from '${dist}run-records.js';
    import { SlotQueue } from '${dist}slot-queue.js';
    import { ClusterScheduler } from '${dist}scheduler.js';
    const names = clusterNames('t');
    const link = await NatsLink.open('${url}', { name: 'doomed' });
    const records = await RunRecords.open(link, names.recordsBucket);
    const queue = await SlotQueue.open(link, names, { cap: 2, ackWaitMs: 1000 });
    const scheduler = new ClusterScheduler(records, queue, { id: 'doomed', host: 'localhost', pid: process.pid });
    const claim = await scheduler.next(AbortSignal.timeout(10000));
    claim.lease.keepAlive(() => {});
    console.log('claimed ' + claim.run.runId);
    setInterval(() => {}, 1000);
  `;
}

function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve) => createInterface({ input: stream }).once('line', resolve));
}

function timeout(ms: number, what: () => string): Promise<never> {
  return new Promise((_, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what()}`)), ms);
    cleanups.push(() => clearTimeout(timer));
  });
}

async function waitUntil(check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
