/**
 * A full or read-only disk under the state dir (injected by test/fixtures/disk-faults.mjs into a
 * real daemon process, no mount needed): the daemon keeps answering, refuses runs it cannot record
 * with an error naming the file and errno, shows itself degraded in status, recovers when space
 * returns, and corrupts nothing already stored. A state dir it cannot use at start is one line.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { CLI, makeTempDir, REPO, startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const INJECTOR = pathToFileURL(resolve(REPO, 'test', 'fixtures', 'disk-faults.mjs')).href;
const parent = { sessionId: 'parent-1', cwd: '/tmp' };
const prompt = (text: string) => [{ type: 'text', text }];
const daemons: DaemonProcess[] = [];
const dirs: string[] = [];
const peers: RawPeer[] = [];
afterEach(async () => {
  peers.splice(0).forEach((peer) => peer.close());
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

function injector(): { env: Record<string, string>; fail(dir: string, code: 'ENOSPC' | 'EROFS'): void; heal(): void } {
  const dir = makeTempDir('subagentd-faults-');
  dirs.push(dir);
  const control = join(dir, 'fault.json');
  return {
    env: { NODE_OPTIONS: `--import=${INJECTOR}`, SUBAGENTD_TEST_DISK_FAULTS: control },
    fail: (target, code) => writeFileSync(control, JSON.stringify({ dir: target, code })),
    heal: () => rmSync(control, { force: true }),
  };
}

async function peer(socket: string): Promise<RawPeer> {
  const p = await RawPeer.initialized(socket);
  peers.push(p);
  return p;
}

interface Status {
  degraded?: { reason: string; faults: Array<{ path: string; code: string }> };
}

it('on a full disk the daemon answers, refuses unrecordable runs by path and errno, shows degraded, and recovers', async () => {
  const disk = injector();
  const daemon = await startDaemon({}, [], { env: disk.env });
  daemons.push(daemon);
  const index = join(daemon.stateDir, 'runs.jsonl');
  const owner = await peer(daemon.socket);
  const done = (await owner.request('subagent/start', { provider: 'echo', prompt: prompt('echo stored before'), parent })).result as { runId: string };
  await owner.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId: string }).runId === done.runId);
  const hanging = (await owner.request('subagent/start', { provider: 'echo', prompt: prompt('hang'), parent })).result as { runId: string };
  await waitFor(() => readFileSync(index, 'utf8').includes(hanging.runId), 5000, () => 'the hanging run recorded');
  const before = readFileSync(index, 'utf8');

  disk.fail(daemon.stateDir, 'ENOSPC');
  // A new connection is answered (its log line fails), and a run's change cannot be recorded.
  const other = await peer(daemon.socket);
  expect((await owner.request('run/cancel', { runId: hanging.runId })).error).toBeUndefined();
  await owner.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId: string }).runId === hanging.runId);
  // Both writes fail asynchronously (the index's batch, the log line's write): wait for both faults.
  const logFile = join(daemon.stateDir, 'daemon.log');
  const bothFaulted = (s: Status): boolean => [index, logFile].every((path) => s.degraded?.faults.some((f) => f.path === path));
  let status: Status = {};
  for (let i = 0; i < 250 && !bothFaulted(status); i++) {
    status = (await other.request('daemon/status', {})).result as Status;
    if (!bothFaulted(status)) await new Promise((r) => setTimeout(r, 20));
  }
  expect(status.degraded?.faults).toEqual(expect.arrayContaining([{ path: index, code: 'ENOSPC', since: expect.any(String) }]));
  expect(status.degraded?.reason).toContain(`cannot write ${index}: ENOSPC (no space left on device)`);
  expect(status.degraded?.faults.map((f) => f.path)).toContain(logFile);

  const refused = await other.request('subagent/start', { provider: 'echo', prompt: prompt('echo refused'), parent });
  expect(refused.error?.data?.code).toBe('START_FAILED');
  expect(refused.error?.message).toContain(`cannot write ${index}: ENOSPC`);
  expect(daemon.proc.exitCode).toBeNull();
  // Nothing already stored was touched: the file still begins with what it held before the fault.
  expect(readFileSync(index, 'utf8')).toBe(before);

  disk.heal();
  const later = await peer(daemon.socket); // its log line lands: the log recovers
  const again = await later.request('subagent/start', { provider: 'echo', prompt: prompt('echo after'), parent });
  expect(again.error).toBeUndefined();
  await waitFor(() => readFileSync(index, 'utf8').includes((again.result as { runId: string }).runId), 5000, () => 'the new run recorded');
  status = (await later.request('daemon/status', {})).result as Status;
  expect(status.degraded).toBeUndefined();
  // Every line is whole JSON, and the cancelled run's settlement was written once space returned.
  const records = readFileSync(index, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { runId: string; state: string });
  expect(records.filter((r) => r.runId === hanging.runId).at(-1)?.state).not.toBe('running');
  expect(daemon.stderr()).not.toMatch(/\n\s+at /);
});

function startRaw(stateDir: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const dir = makeTempDir('subagentd-faults-sock-');
  dirs.push(dir);
  const proc = spawn(process.execPath, [CLI, 'daemon', '--socket', join(dir, 'd.sock'), '--state-dir', stateDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', ...env },
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
  return new Promise((res) =>
    proc.once('exit', (code) => {
      clearTimeout(killer);
      res({ code, stderr });
    }),
  );
}

it('a read-only or full state dir at start is one line naming the path and errno, never a stack', async () => {
  const disk = injector();
  const root = makeTempDir('subagentd-faults-state-');
  dirs.push(root);
  const readOnly = join(root, 'ro');
  disk.fail(readOnly, 'EROFS');
  const ro = await startRaw(readOnly, disk.env);
  expect(ro.code).toBe(1);
  expect(ro.stderr.trim().split('\n')).toHaveLength(1);
  expect(ro.stderr).toContain(readOnly);
  expect(ro.stderr).toContain('EROFS (read-only file system)');

  const full = join(root, 'full');
  disk.fail(full, 'ENOSPC');
  const nospace = await startRaw(full, disk.env);
  expect(nospace.code).toBe(1);
  expect(nospace.stderr.trim().split('\n')).toHaveLength(1);
  expect(nospace.stderr).toContain(`cannot write ${join(full, 'daemon.lock')}: ENOSPC (no space left on device)`);
  expect(existsSync(join(full, 'daemon.lock'))).toBe(false); // no empty lock left to block the next start
});

it('an auto-started daemon whose stderr is a file on the full disk keeps answering (its warnings cannot be written)', async () => {
  const disk = injector();
  const root = makeTempDir('subagentd-faults-stderr-');
  dirs.push(root);
  const stateDir = join(root, 'state');
  mkdirSync(stateDir, { mode: 0o700 });
  const socket = join(root, 'd.sock');
  // As client/auto-start.ts does: the daemon's stderr appended to a file in its state dir.
  const stderrFile = openSync(join(stateDir, 'daemon.stderr.log'), 'a');
  const proc = spawn(process.execPath, [CLI, 'daemon', '--socket', socket, '--state-dir', stateDir], {
    stdio: ['ignore', 'ignore', stderrFile],
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', ...disk.env },
  });
  closeSync(stderrFile);
  const exited = new Promise((r) => proc.once('exit', r));
  try {
    await waitFor(() => (existsSync(socket) && existsSync(`${socket}.token`)) || proc.exitCode !== null, 10_000, () => 'the daemon to listen');
    disk.fail(stateDir, 'ENOSPC');
    const client = await peer(socket); // its log line fails on both the log file and stderr
    let status: Status = {};
    for (let i = 0; i < 250 && !status.degraded?.faults.some((f) => f.path === join(stateDir, 'daemon.log')); i++) {
      status = (await client.request('daemon/status', {})).result as Status;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(status.degraded?.faults.map((f) => f.path)).toEqual(expect.arrayContaining([join(stateDir, 'daemon.log')]));
    // The degraded warning itself goes to stderr, which fails too: still alive and answering.
    await waitFor(() => false, 300).catch(() => undefined);
    expect(((await client.request('daemon/status', {})).result as Status).degraded?.faults.map((f) => f.path)).toContain(join(stateDir, 'daemon.stderr.log'));
    expect(proc.exitCode).toBeNull();
    // And it still shuts down on SIGTERM with the disk full (no exit hook retrying a write for ever).
    proc.kill('SIGTERM');
    await waitFor(() => proc.exitCode !== null || proc.signalCode !== null, 5000, () => 'the daemon to exit on SIGTERM');
    expect(proc.exitCode).toBe(0);
  } finally {
    proc.kill('SIGTERM');
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
  }
});
