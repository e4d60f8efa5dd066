/**
 * Retention of the pool's run records (daemon/cluster/record-retention.ts), with a real daemon
 * (the built CLI) on a real nats-server: a record settled longer ago than
 * `retention.runs.maxAgeDays` is purged from the bucket and leaves every view; a running one
 * stays however old it is.
 */
import { expect, it } from 'vitest';
import { clusterScene } from './support/cluster-scene.js';
import { waitFor } from './support/daemon-process.js';

const scene = clusterScene('subagentd-cluster-retention-');
const { clients, records } = scene;
const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { sessionId: 'retention', cwd: process.cwd() };
/** Two seconds, in the config's unit. */
const MAX_AGE_DAYS = 2 / 86_400;

it('a settled record past retention is purged from the bucket and every view; a running one stays', async () => {
  const member = await scene.member({ model: { default: scene.scriptedModel(30) }, limits: { maxConcurrentRuns: 2 }, retention: { runs: { maxAgeDays: MAX_AGE_DAYS } } }, { ackWaitMs: 2000 });
  const store = await records();
  const service = await clients.connect(member.socket);
  const done = await service.start('echo', { prompt: text('echo old news'), parent, signal: AbortSignal.timeout(30_000) });
  expect(await done.result).toMatchObject({ stopReason: 'completed' });
  await done.dispose();
  const cancel = new AbortController();
  const running = await service.start('echo', { prompt: text('hang'), parent, signal: cancel.signal });
  await waitFor(() => store.seen(done.id) !== undefined && store.seen(running.id) !== undefined, 10_000, () => 'both records in the view');

  await waitFor(() => store.seen(done.id) === undefined, 20_000, () => `the settled record to leave the view: ${JSON.stringify(store.seen(done.id)?.record.state)}`);
  expect(await store.get(done.id)).toBeUndefined();
  // Older than the retention by now, and still running: kept through the sweeps that follow.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  expect(store.seen(running.id)?.record.state).toBe('running');
  expect((await store.get(running.id))?.record.state).toBe('running');
  cancel.abort();
  expect(await running.result).toMatchObject({ stopReason: 'aborted' });
  await running.dispose();
}, 60_000);
