/**
 * A restart of the pool's nats-server under two real daemons (the built CLI): runs running and
 * runs queued when the server is stopped (by its pid); it comes back on the same port and store
 * dir. The queued runs are still admitted and complete, the running children finish (during the
 * outage: their outcome is stored once the server is back), every run keeps its record, and new
 * starts are refused (CLUSTER_UNAVAILABLE) only while the server is down.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { SubagentResult } from '../protocol/index.js';
import type { ClusterRun } from '../daemon/cluster/cluster-run.js';
import { clusterNames } from '../daemon/cluster/names.js';
import { RunRecords } from '../daemon/cluster/run-records.js';
import { clusterScene, startWhenOnline, untilMemberOffline } from './support/cluster-scene.js';
import { waitFor, type DaemonProcess } from './support/daemon-process.js';

const scene = clusterScene('subagentd-cluster-restart-');
const { clients } = scene;

/** Each child takes one model step of `delayMs` (a scripted model: no network), then answers "done". */
function member(cap: number, delayMs: number, slots?: number): Promise<DaemonProcess> {
  return scene.member(
    { model: { default: scene.scriptedModel(delayMs) }, limits: { maxConcurrentRuns: cap } },
    // A lease well beyond the outage: the server restores a ticket's lease from its store, which
    // need not hold the latest heartbeat, so a lease shorter than delivery-to-reconnect could lapse.
    { ackWaitMs: 30_000, slots },
  );
}

const text = (value: string) => [{ type: 'text' as const, text: value }];

it('a nats-server restart keeps queued and running runs: all complete with their records, and starts are refused only while it is down', async () => {
  const cap = 2;
  const dir = scene.dir();
  // One member executes; two only take clients (each admits up to the cap locally, then queues
  // in the cluster). The third has nothing in flight: its refusal below cannot wait on a local slot.
  const a = await member(cap, 1500);
  const b = await member(cap, 1500, 0);
  const c = await member(cap, 1500, 0);
  const services = [await clients.connect(a.socket), await clients.connect(b.socket)];
  const idle = await clients.connect(c.socket);
  const link = await scene.link();
  let store = await RunRecords.open<ClusterRun>(link, clusterNames().recordsBucket);

  // Four runs for a cap of two, two through each of two members: two run, two wait in the
  // cluster's queue (their starts are still pending).
  const runs = Array.from({ length: 4 }, (_, i) =>
    services[i % 2]!.start('spawn', { prompt: text(`task ${i}`), parent: { sessionId: `client-${i % 2}`, cwd: dir }, signal: AbortSignal.timeout(60_000) }).then(async (run) => ({
      runId: run.id,
      result: (await run.result) as SubagentResult,
      dispose: () => run.dispose(),
    })),
  );
  for (const run of runs) run.catch(() => undefined); // a failed assertion below must not leave them unhandled
  const mine = (): ClusterRun[] => [...store.all()].map((r) => r.record);
  await waitFor(() => mine().filter((r) => r.childId !== undefined).length === cap && mine().filter((r) => r.state === 'queued').length === 2, 15_000, () => `two running and two queued: ${JSON.stringify(mine().map((r) => [r.state, r.childId]))}`);
  const before = new Map(mine().map((r) => [r.runId, r]));

  await scene.nats().halt();
  await untilMemberOffline(c);
  // Down: a member that knows it refuses new starts, typed, at once.
  const refused = await idle.start('spawn', { prompt: text('while down'), parent: { sessionId: 'late', cwd: dir }, signal: AbortSignal.timeout(10_000) }).catch((error: unknown) => error);
  expect(refused).toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
  // The running children finish while the server is down: their outcome waits on the member.
  const log = join(a.stateDir, 'daemon.log');
  await waitFor(() => readFileSync(log, 'utf8').includes('failed; retrying while the run is ours'), 15_000, () => 'a child settled during the outage');
  await scene.nats().restart();

  const settled = await Promise.all(runs);
  for (const { result } of settled) expect(result).toMatchObject({ stopReason: 'completed', output: text('done') });
  // Every run of before the restart has its record, settled by one execution (no takeover needed).
  store.close();
  store = await RunRecords.open<ClusterRun>(link, clusterNames().recordsBucket);
  for (const { runId } of settled) {
    const record = (await store.get(runId))!.record;
    expect(record).toMatchObject({ state: 'settled', attempt: 1, result: { stopReason: 'completed' } });
    expect(before.has(runId)).toBe(true);
    expect(record.queuedAt).toBe(before.get(runId)!.queuedAt);
  }
  // The two that were running when it went down finished on the member that ran them, in their lease.
  for (const [runId, was] of before) if (was.childId !== undefined) expect((await store.get(runId))!.record.worker?.id).toBe(was.worker!.id);

  // Back up: the members take new starts again.
  for (const service of [idle, ...services]) {
    const run = await startWhenOnline(() => service.start('spawn', { prompt: text('after'), parent: { sessionId: 'after', cwd: dir }, signal: AbortSignal.timeout(30_000) }));
    expect(await run.result).toMatchObject({ stopReason: 'completed' });
    await run.dispose();
  }
  await Promise.all(settled.map((run) => run.dispose()));
}, 60_000);
