/**
 * A member pulls its slot tickets in batches (daemon/cluster/ticket-puller.ts): real daemons on a
 * real nats-server. An idle member with 16 slot loops keeps one pull request waiting at the
 * server, not one per loop (the server's own count of waiting pulls says so); and a burst larger
 * than its slots, over two members, still executes every run exactly once, on its first attempt,
 * with the cluster cap holding.
 */
import { describe, expect, it } from 'vitest';
import { clusterNames } from '../daemon/cluster/names.js';
import { clusterScene } from './support/cluster-scene.js';

const scene = clusterScene('subagentd-pull-');
const { clients, records } = scene;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('cluster ticket pulls', () => {
  it('an idle member with 16 slots keeps one pull waiting at the server, not 16', async () => {
    await scene.member({ limits: { maxConcurrentRuns: 64 } }, { ackWaitMs: 15_000, slots: 16 });
    const link = await scene.link();
    const names = clusterNames();
    const waiting = async (): Promise<number> => (await link.jsm.consumers.info(names.queueStream, names.slotsConsumer)).num_waiting;
    // The member's loops are pulling once the server counts a waiting pull.
    for (let tries = 0; (await waiting()) === 0; tries++) {
      if (tries > 300) throw new Error('the member never pulled a ticket');
      await sleep(50);
    }
    // Sampled across a few pull expiries (1 s each): at a renewal, the old pull and the new one may overlap.
    const samples: number[] = [];
    for (let i = 0; i < 25; i++) {
      samples.push(await waiting());
      await sleep(100);
    }
    expect(Math.max(...samples)).toBeLessThanOrEqual(2);
    expect(samples).toContain(1);
  }, 60_000);

  it('a burst of 40 starts over two members with 3 slots each: every run executes once, on its first attempt', async () => {
    const config = { model: { default: scene.scriptedModel(30) }, limits: { maxConcurrentRuns: 6 } };
    const a = await scene.member(config, { ackWaitMs: 15_000, slots: 3 });
    const b = await scene.member(config, { ackWaitMs: 15_000, slots: 3 });
    const services = await Promise.all([a, b].map((m) => clients.connect(m.socket)));
    const results = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const run = await services[i % 2]!.start('spawn', {
          prompt: [{ type: 'text', text: 'go' }],
          parent: { sessionId: `pull-${i % 4}`, cwd: process.cwd() },
          signal: AbortSignal.timeout(120_000),
        });
        return { runId: run.id, result: await run.result };
      }),
    );
    for (const { result } of results) expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const store = await records();
    const ids = new Set(results.map((r) => r.runId));
    const mine = [...store.all()].map((r) => r.record).filter((r) => ids.has(r.runId));
    expect(mine).toHaveLength(40);
    expect(mine.filter((r) => r.attempt !== 1)).toEqual([]);
    // The cap held: at no moment did more than 6 runs execute (from the records' own claim and settle times).
    const edges = mine.flatMap((r) => [
      { at: Date.parse(r.claimedAt!), step: 1 },
      { at: Date.parse(r.settledAt!), step: -1 },
    ]);
    edges.sort((x, y) => x.at - y.at || x.step - y.step);
    let running = 0;
    let most = 0;
    for (const edge of edges) most = Math.max(most, (running += edge.step));
    expect(most).toBeLessThanOrEqual(6);
  }, 150_000);
});
