/**
 * A lease lapses only for a real fault: real daemons on a real nats-server, a 3 s lease. A burst
 * of 200 starts (more than the cap, so claims queue up behind the pool's KV writes) ends with
 * every run executed once, by one member, on its first attempt: no member let go of a run and no
 * ticket was taken over. A member killed with kill -9 is still taken over under the same lease.
 * Takeovers are counted from the members' own records and logs, not timed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusterScene } from './support/cluster-scene.js';
import type { DaemonProcess } from './support/daemon-process.js';

const scene = clusterScene('subagentd-lease-');
const { clients, records } = scene;
const LEASE_MS = 3000;

function member(delayMs: number, slots?: number): Promise<DaemonProcess> {
  return scene.member({ model: { default: scene.scriptedModel(delayMs) }, limits: { maxConcurrentRuns: 64 } }, { ackWaitMs: LEASE_MS, slots });
}

/** How often a member stopped a child because its lease lapsed (its own log says so). */
function lapses(member: DaemonProcess): number {
  return readFileSync(join(member.stateDir, 'daemon.log'), 'utf8')
    .split('\n')
    .filter((line) => line.includes('letting go of a run')).length;
}

describe('cluster leases under load', () => {
  it('a burst of 200 starts at a 3 s lease: no lease lapses, no run is taken over, every run executes once', async () => {
    const a = await member(150);
    const b = await member(150);
    const services = await Promise.all([a, a, b, b].map((m) => clients.connect(m.socket)));
    const results = await Promise.all(
      services.flatMap((service, client) =>
        Array.from({ length: 50 }, async () => {
          const run = await service.start('spawn', {
            prompt: [{ type: 'text', text: 'go' }],
            parent: { sessionId: `burst-${client}`, cwd: process.cwd() },
            signal: AbortSignal.timeout(150_000),
          });
          const result = await run.result;
          return { runId: run.id, result };
        }),
      ),
    );
    for (const { result } of results) expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const store = await records();
    const ids = new Set(results.map((r) => r.runId));
    const mine = [...store.all()].map((r) => r.record).filter((r) => ids.has(r.runId));
    expect(mine).toHaveLength(200);
    const takenOver = mine.filter((r) => r.attempt !== 1).map((r) => `${r.runId}: attempt ${r.attempt}`);
    expect(takenOver).toEqual([]);
    expect(lapses(a) + lapses(b)).toBe(0);
  }, 180_000);

  it('a member killed with kill -9 is still taken over at the same lease', async () => {
    const front = await member(100, 0);
    const doomed = await member(4000);
    const store = await records();
    const service = await clients.connect(front.socket);
    const run = await service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent: { sessionId: 'doomed', cwd: process.cwd() }, signal: AbortSignal.timeout(60_000) });
    for (let i = 0; store.seen(run.id)?.record.childId === undefined; i++) {
      if (i > 500) throw new Error('the run never started');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(store.seen(run.id)!.record.worker?.pid).toBe(doomed.proc.pid);
    doomed.proc.kill('SIGKILL');
    const heir = await member(100);
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const final = (await store.get(run.id))!.record;
    expect(final.worker?.pid).toBe(heir.proc.pid);
    expect(final.attempt).toBe(2);
  }, 60_000);
});
