/**
 * The operator's cancel (`daemon/cancel`, `subagentd cancel`): any connection may stop any live
 * run, descendants included, as its owner's `run/cancel` would, while `run/cancel` itself stays
 * the owner's. Real daemon process on the scripted model; the CLI as a real process.
 */
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import type { RunInfo } from '../protocol/index.js';
import { cleanEnv, MAIN } from './support/cli-harness.js';
import { makeTempDir, type DaemonProcess } from './support/daemon-process.js';
import { startE2eDaemon } from './support/e2e-daemon.js';
import { RawPeer } from './support/raw-peer.js';

const peers: RawPeer[] = [];
let daemon: DaemonProcess | undefined;
let scriptDir: string | undefined;
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.close();
  await daemon?.stop();
  daemon = undefined;
  if (scriptDir) rmSync(scriptDir, { recursive: true, force: true });
});

const delegate = { name: 'subagent', arguments: { description: 'one level deeper', prompt: 'delegate this again' } };
const work = { toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], delayMs: 300 };
const prompt = [{ type: 'text', text: 'start' }];

async function delegatingDaemon(): Promise<DaemonProcess> {
  scriptDir = makeTempDir('operator-cancel-');
  const script = join(scriptDir, 'script.json');
  // Each level delegates once (the grandchild's call is refused at maxDepth 2), then works slowly.
  writeFileSync(script, JSON.stringify({ steps: [{ toolCalls: [delegate] }, ...Array(100).fill(work), { text: 'finished' }] }));
  daemon = await startE2eDaemon({ delegation: { spawn: { providers: ['spawn'] } }, model: { default: `scripted:${script}` } });
  return daemon;
}

async function peer(socket: string, name: string): Promise<RawPeer> {
  const p = await RawPeer.initialized(socket, name);
  peers.push(p);
  return p;
}

async function startRoot(owner: RawPeer, cwd: string, session: string): Promise<string> {
  const started = await owner.request('subagent/start', { provider: 'spawn', prompt, parent: { sessionId: session, cwd }, maxDepth: 2 }, 15_000);
  return (started.result as { runId: string }).runId;
}

async function childOf(operator: RawPeer, rootId: string): Promise<RunInfo> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const runs = ((await operator.request('runs/list', {})).result as { runs: RunInfo[] }).runs;
    const child = runs.find((r) => r.parentRunId === rootId && r.state === 'running');
    if (child) return child;
    if (Date.now() > deadline) throw new Error(`the root ${rootId} never delegated`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

it('another connection cannot run/cancel a run it does not own, but daemon/cancel stops it and its descendants', async () => {
  const d = await delegatingDaemon();
  const [owner, operator] = [await peer(d.socket, 'owner'), await peer(d.socket, 'operator')];
  const rootId = await startRoot(owner, d.dir, 'root-a');
  const child = await childOf(operator, rootId);

  // The owner's method stays the owner's.
  expect((await operator.request('run/cancel', { runId: rootId })).error).toMatchObject({ data: { code: 'NOT_OWNER' } });
  // The operator's names no run that is not live.
  expect((await operator.request('daemon/cancel', { runId: 'no-such-run' })).error).toMatchObject({ data: { code: 'UNKNOWN_RUN' } });
  // Bad params are a typed error too.
  expect((await operator.request('daemon/cancel', { runId: rootId, level: 'soon' })).error).toMatchObject({ code: -32602 });

  expect((await operator.request('daemon/cancel', { runId: rootId })).error).toBeUndefined();
  const waited = await owner.request('run/wait', { runId: rootId }, 30_000);
  expect(waited.result).toMatchObject({ stopReason: 'aborted' });
  const runs = ((await operator.request('runs/list', {})).result as { runs: RunInfo[] }).runs;
  expect(runs.find((r) => r.runId === child.runId)).toMatchObject({ stopReason: 'aborted' });
}, 60_000);

it('`subagentd cancel RUN --after-step` stops a live run from the command line', async () => {
  const d = await delegatingDaemon();
  const owner = await peer(d.socket, 'owner');
  const rootId = await startRoot(owner, d.dir, 'root-b');
  await childOf(owner, rootId);
  const { stdout } = await promisify(execFile)(process.execPath, [MAIN, 'cancel', rootId, '--after-step', '--socket', d.socket], {
    env: cleanEnv(),
    timeout: 20_000,
  });
  expect(stdout).toBe(`cancelled ${rootId} (after its current step)\n`);
  const waited = await owner.request('run/wait', { runId: rootId }, 30_000);
  expect(waited.result).toMatchObject({ stopReason: 'aborted' });
  // An unknown run is an error on stderr and exit 1.
  const failed = await promisify(execFile)(process.execPath, [MAIN, 'cancel', 'no-such-run', '--socket', d.socket], { env: cleanEnv(), timeout: 20_000 }).then(
    () => undefined,
    (error: { code?: number; stderr?: string }) => error,
  );
  expect(failed?.code).toBe(1);
  expect(failed?.stderr).toContain('no live run no-such-run');
}, 60_000);
