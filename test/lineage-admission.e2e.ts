/**
 * Lineages inside the pool (daemon/service/lineage-slots.ts): a parent waiting on a nested child
 * lends it its slot, so children that delegate never deadlock admission, and an `after-step`
 * cancel of a root reaches every descendant. Real daemon processes on the scripted model; every
 * level replays the same script (call `subagent`, then answer), capped by the lineage's depth.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RunInfo, StartProgress } from '../protocol/index.js';
import { makeTempDir, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { chain, within } from './support/lineage.js';
import { RawPeer } from './support/raw-peer.js';

const clients = new ClientPool();
const runs = new RunPool();
const peers: RawPeer[] = [];
let daemon: DaemonProcess | undefined;
const scriptDirs: string[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.close();
  await runs.disposeAll();
  await clients.closeAll();
  await daemon?.stop();
  daemon = undefined;
  for (const dir of scriptDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const delegate = { name: 'subagent', arguments: { description: 'one level deeper', prompt: 'delegate this again' } };

async function daemonWithScript(steps: unknown[], config: Record<string, unknown> = {}): Promise<DaemonProcess> {
  const dir = makeTempDir('lineage-script-');
  scriptDirs.push(dir);
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify({ steps }));
  daemon = await startE2eDaemon({ delegation: { spawn: { providers: ['spawn'] } }, model: { default: `scripted:${script}` }, ...config });
  return daemon;
}



const prompt = [{ type: 'text' as const, text: 'start' }];

it('maxConcurrentRuns: 1 — a three-level lineage completes on its root\'s one slot', async () => {
  const d = await daemonWithScript([{ toolCalls: [delegate] }, { text: 'done at my level' }], { limits: { maxConcurrentRuns: 1 } });
  const service = await clients.connect(d.socket);
  const run = runs.track(await service.start('spawn', { prompt, parent: { sessionId: 'root', cwd: d.dir }, signal: new AbortController().signal }));
  expect(await within(30_000, 'the lineage on one slot', run.result)).toMatchObject({ stopReason: 'completed' });
  const lineage = chain(await service.ops.runs(), run.id);
  expect(lineage).toHaveLength(3);
  expect(lineage.map((r) => r.stopReason)).toEqual(['completed', 'completed', 'completed']);
}, 60_000);

it('default limits — 2 clients × 40 delegating roots all settle; a third client\'s start is admitted in its fair turn; status shows how slots are held', async () => {
  // Root and child delegate (the child's call is refused at maxDepth 2), then answer after a pause,
  // so every root's slot is held while the descendants run and the queue is looked at.
  const d = await daemonWithScript([{ toolCalls: [delegate] }, { text: 'done', delayMs: 1500 }]);
  const [a, b, c] = await Promise.all([clients.connect(d.socket), clients.connect(d.socket), clients.connect(d.socket)]);
  const start = (service: typeof a, i: number, onStartProgress?: (p: StartProgress) => void) =>
    service.start('spawn', {
      prompt,
      parent: { sessionId: `root-${i}`, cwd: d.dir },
      maxDepth: 2,
      signal: new AbortController().signal,
      ...(onStartProgress && { onStartProgress }),
    });
  const PER_CLIENT = 40; // 32 run (maxRunsPerConnection), 8 wait, for each of the two
  const results = [a!, b!].flatMap((service, s) =>
    Array.from({ length: PER_CLIENT }, (_, i) => start(service, s * 100 + i).then((run) => runs.track(run).result)),
  );
  type Held = { running: number; queued: number; roots: number | undefined; descendants: number; descendantsWaiting: number };
  let seen: Held = { running: 0, queued: 0, roots: undefined, descendants: 0, descendantsWaiting: 0 };
  const poll = async (): Promise<void> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { admission } = await a!.ops.status();
      seen = { running: admission.running, queued: admission.queued, roots: admission.roots, descendants: admission.descendants ?? 0, descendantsWaiting: admission.descendantsWaiting ?? 0 };
      if (seen.running === 64 && seen.queued === 16 && seen.descendants > 0) return;
      if (Date.now() > deadline) throw new Error(`never saw 64 roots held, 16 queued and descendants running: ${JSON.stringify(seen)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  await poll();
  expect(seen.roots).toBe(64);
  // The third client's start joins the queue behind 16 others, but round robin puts it within the first three grants.
  const positions: number[] = [];
  const third = start(c!, 999, (p) => {
    if (p.kind === 'queued') positions.push(p.position);
  }).then((run) => runs.track(run).result);
  const settled = await within(120_000, 'every lineage to settle', Promise.all([...results, third]));
  expect(settled.map((r) => r.stopReason)).toEqual(Array(2 * PER_CLIENT + 1).fill('completed'));
  expect(positions.length).toBeGreaterThan(0);
  expect(positions[0]).toBeLessThanOrEqual(3);
  const after = await a!.ops.status();
  expect(after.admission).toMatchObject({ running: 0, queued: 0, descendants: 0, descendantsWaiting: 0 });
}, 180_000);

it('after-step on a root applies after-step to every descendant: each ends within one step', async () => {
  // Each level delegates, then works in slow steps; the third level's call is refused, so it is
  // the one working when the root is told to stop after its step.
  const work = { toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], delayMs: 500 };
  const d = await daemonWithScript([{ toolCalls: [delegate] }, ...Array(20).fill(work), { text: 'finished every step' }]);
  const peer = await RawPeer.initialized(d.socket, 'canceller');
  peers.push(peer);
  const started = await peer.request('subagent/start', { provider: 'spawn', prompt, parent: { sessionId: 'root', cwd: d.dir } }, 15_000);
  const rootId = (started.result as { runId: string }).runId;
  const list = async (): Promise<RunInfo[]> => ((await peer.request('runs/list', {})).result as { runs: RunInfo[] }).runs;
  const stepsOf = (info: RunInfo): number =>
    readFileSync(join(d.stateDir, 'sessions', `${info.id}.jsonl`), 'utf8')
      .trim()
      .split('\n')
      .filter((line) => (JSON.parse(line) as { type?: string }).type === 'assistant/message').length;
  let lineage: RunInfo[] = [];
  const deadline = Date.now() + 20_000;
  // Until the third level has begun its slow steps.
  while (!((lineage = chain(await list(), rootId)).length === 3 && stepsOf(lineage[2]!) >= 2)) {
    if (Date.now() > deadline) throw new Error(`the lineage never reached its third level's work: ${JSON.stringify(lineage)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const before = lineage.map(stepsOf);
  expect((await peer.request('run/cancel', { runId: rootId, level: 'after-step' })).error).toBeUndefined();
  const waited = await peer.request('run/wait', { runId: rootId }, 30_000);
  expect(waited.result).toMatchObject({ stopReason: 'aborted' });
  const ended = chain(await list(), rootId);
  expect(ended).toHaveLength(3);
  // No descendant finished its turn: each ended aborted, after at most the step it was in.
  expect(ended.map((r) => r.stopReason)).toEqual(['aborted', 'aborted', 'aborted']);
  const afterSteps = ended.map(stepsOf);
  for (let i = 0; i < 3; i++) expect(afterSteps[i]!).toBeLessThanOrEqual(before[i]! + 1);
}, 60_000);
