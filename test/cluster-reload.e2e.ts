/**
 * ACP providers that a `reload` (SIGHUP) adds take part in the pool like configured providers:
 * real daemons (the built CLI) on a real nats-server, a hand-written ACP agent as a real child
 * process. A run of the reloaded provider started through a member that executes nothing runs
 * on a member that has the provider, under the cluster's record; a reload that drops the
 * provider from that member leaves it to the members that still have it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { clusterScene } from './support/cluster-scene.js';
import { REPO, waitFor, type DaemonProcess } from './support/daemon-process.js';

const RAW_AGENT = resolve(REPO, 'test', 'fixtures', 'acp-raw-agent.mjs');
const text = (value: string) => [{ type: 'text' as const, text: value }];

const scene = clusterScene();
const { clients } = scene;

function member(slots?: number): Promise<DaemonProcess> {
  return scene.member({ limits: { maxConcurrentRuns: 2 } }, { ackWaitMs: 15_000, slots });
}

/** Rewrites a member's config with `providers` and sends it SIGHUP (what `subagentd reload` does). */
function reload(daemon: DaemonProcess, providers: unknown[]): void {
  const config = JSON.parse(readFileSync(daemon.configPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(daemon.configPath, JSON.stringify({ ...config, providers }));
  daemon.proc.kill('SIGHUP');
}

/** Waits until a member has applied its `count`-th reload (signals sent close together coalesce). */
async function reloaded(daemon: DaemonProcess, count: number): Promise<void> {
  const applied = (): number => readFileSync(join(daemon.stateDir, 'daemon.log'), 'utf8').split('"settings reloaded"').length - 1;
  await waitFor(() => applied() >= count, 15_000, () => `reload #${count} of ${daemon.socket}`);
}

const rawAcp = { name: 'raw', type: 'acp', command: process.execPath, args: [RAW_AGENT] };

it('an ACP provider added by reload runs in the pool: a start through a member that executes nothing runs where the provider is', async () => {
  const front = await member(0);
  const workers = [await member(), await member()];
  const store = await scene.records();
  const service = await clients.connect(front.socket);
  expect(service.getProvider('raw')).toBeUndefined();

  for (const daemon of [front, ...workers]) reload(daemon, [rawAcp]);
  for (const daemon of [front, ...workers]) await reloaded(daemon, 1);
  await waitFor(() => service.getProvider('raw') !== undefined, 15_000, () => 'the reloaded provider on the front');
  // The second worker drops it again: only the first may take its runs.
  reload(workers[1]!, []);
  await reloaded(workers[1]!, 2);

  const parent = { sessionId: 'reload-test', cwd: front.dir };
  for (let i = 0; i < 3; i++) {
    const run = await service.start('raw', { prompt: text(`hello ${i}`), parent, signal: AbortSignal.timeout(30_000) });
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed' });
    // A record of the pool, executed by the member that has the provider, not by the front.
    expect((await store.get(run.id))!.record).toMatchObject({ provider: 'raw', state: 'settled', worker: { pid: workers[0]!.proc.pid } });
    await run.dispose();
  }
}, 60_000);
