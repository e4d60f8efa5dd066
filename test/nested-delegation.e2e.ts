/**
 * Nested delegation inside one daemon process: spawn children get the `subagent` tool (config
 * `delegation.spawn`), so a child delegates to a grandchild, and so on until the depth cap refuses.
 * The scripted model replays the same script for every child: call `subagent`, then answer.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RunInfo } from '../protocol/index.js';
import { makeTempDir, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { chain } from './support/lineage.js';

const clients = new ClientPool();
const runs = new RunPool();
let daemon: DaemonProcess | undefined;
const scriptDirs: string[] = [];
afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
  await daemon?.stop();
  for (const dir of scriptDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const delegate = { name: 'subagent', arguments: { description: 'one level deeper', prompt: 'delegate this again' } };

/** A daemon whose spawn children may delegate to spawn (default cap 3), on a scripted model. */
async function daemonWithScript(steps: unknown[]): Promise<DaemonProcess> {
  const dir = makeTempDir('nested-script-');
  scriptDirs.push(dir);
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify({ steps }));
  daemon = await startE2eDaemon({ delegation: { spawn: { providers: ['spawn'] } }, model: { default: `scripted:${script}` } });
  return daemon;
}


it('three levels delegate inside the daemon; the third is refused at the cap (3), and the answers come back up', async () => {
  const d = await daemonWithScript([{ toolCalls: [delegate] }, { text: 'done at my level' }]);
  const service = await clients.connect(d.socket);
  const run = runs.track(await service.start('spawn', { prompt: [{ type: 'text', text: 'start' }], parent: { sessionId: 'root', cwd: d.dir }, signal: new AbortController().signal }));
  expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done at my level' }] });

  const lineage = chain(await service.ops.runs());
  expect(lineage).toHaveLength(3);
  expect(lineage[0]!.runId).toBe(run.id);
  expect(lineage.map((r) => [r.mine, r.stopReason])).toEqual([[true, 'completed'], [true, 'completed'], [true, 'completed']]);
  // The tool disposes what it started once it has the result; the root is the client's to dispose.
  expect(lineage.map((r) => r.state)).toEqual(['settled', 'disposed', 'disposed']);

  // What each level's model read back from its subagent call, from the session logs.
  const session = (info: RunInfo) =>
    readFileSync(join(d.stateDir, 'sessions', `${info.id}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  const toolResults = (info: RunInfo) =>
    session(info).flatMap((e) => (e.type === 'tool/result' ? [{ isError: e.isError, text: e.content.map((b: { text: string }) => b.text).join('') }] : []));
  expect(toolResults(lineage[0]!)).toEqual([{ isError: false, text: 'done at my level' }]);
  expect(toolResults(lineage[1]!)).toEqual([{ isError: false, text: 'done at my level' }]);
  const refused = toolResults(lineage[2]!);
  expect(refused).toHaveLength(1);
  expect(refused[0]!.isError).toBe(true);
  expect(refused[0]!.text).toContain('child depth 4 exceeds maxDepth 3');
  // Depth counts from the root's lineage; each child's parent session is the level above.
  const headers = lineage.map((info) => session(info)[0]);
  expect(headers.map((h) => h.delegationDepth)).toEqual([1, 2, 3]);
  expect(headers.map((h) => h.parentSession)).toEqual(['root', lineage[0]!.id, lineage[1]!.id]);
});

it('cancelling the root run cancels its child and grandchild', async () => {
  // Every level delegates; the third, refused, then "thinks" for long: all three are running.
  const d = await daemonWithScript([{ toolCalls: [delegate] }, { text: 'too late', delayMs: 60_000 }]);
  const service = await clients.connect(d.socket);
  const abort = new AbortController();
  const run = runs.track(await service.start('spawn', { prompt: [{ type: 'text', text: 'start' }], parent: { sessionId: 'root', cwd: d.dir }, signal: abort.signal }));
  let all: RunInfo[] = [];
  const deadline = Date.now() + 10_000;
  while ((all = await service.ops.runs({ state: 'running' })).length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(chain(all)).toHaveLength(3);

  abort.abort();
  expect((await run.result).stopReason).toBe('aborted');
  const settle = Date.now() + 10_000;
  let lineage: RunInfo[] = [];
  do lineage = chain(await service.ops.runs());
  while (lineage.some((r) => r.state === 'running') && Date.now() < settle);
  expect(lineage.map((r) => r.stopReason)).toEqual(['aborted', 'aborted', 'aborted']);
});

it('the root start\'s own maxDepth binds the whole lineage, below the tool\'s cap', async () => {
  const d = await daemonWithScript([{ toolCalls: [delegate] }, { text: 'done at my level' }]);
  const service = await clients.connect(d.socket);
  const run = runs.track(
    await service.start('spawn', { prompt: [{ type: 'text', text: 'start' }], parent: { sessionId: 'root', cwd: d.dir }, maxDepth: 2, signal: new AbortController().signal }),
  );
  expect((await run.result).stopReason).toBe('completed');
  const lineage = chain(await service.ops.runs());
  expect(lineage).toHaveLength(2);
  const events = readFileSync(join(d.stateDir, 'sessions', `${lineage[1]!.id}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  const refusal = events.find((e) => e.type === 'tool/result');
  expect(refusal).toMatchObject({ isError: true });
  expect(JSON.stringify(refusal.content)).toContain('child depth 3 exceeds maxDepth 2');
});
