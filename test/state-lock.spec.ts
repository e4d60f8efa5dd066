/** The state-dir lock judges its owner by pid plus process start time, never by pid alone. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { identify, processStartTime, stillRunning } from '../common/process-identity.js';
import { acquireStateLock, StateDirLockedError } from '../daemon/ops/state-lock.js';
import { makeTempDir } from './support/daemon-process.js';

const dirs: string[] = [];
const procs: ChildProcess[] = [];
afterEach(async () => {
  for (const proc of procs.splice(0)) {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGKILL');
      await gone;
    }
  }
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});
const lockPath = (): string => {
  const dir = makeTempDir('subagentd-lock-');
  dirs.push(dir);
  return join(dir, 'daemon.lock');
};
/** A live process that is not a daemon. */
const bystander = (): number => {
  const proc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  procs.push(proc);
  return proc.pid!;
};

describe('process identity', () => {
  it('reads a start time for a live pid, none for a dead one, and tells a recycled pid apart', () => {
    const pid = bystander();
    const start = processStartTime(pid);
    expect(start).toMatch(/^\d+$/);
    expect(stillRunning(identify(pid))).toBe(true);
    expect(stillRunning({ pid, startTime: String(Number(start) + 1) })).toBe(false);
    expect(stillRunning({ pid: 0x3fffffff })).toBe(false);
  });
});

describe('acquireStateLock', () => {
  it('writes pid and start time, refuses a second taker while held, and releases', () => {
    const path = lockPath();
    const release = acquireStateLock(path);
    const body = JSON.parse(readFileSync(path, 'utf8')) as { pid: number; startTime: string };
    expect(body.pid).toBe(process.pid);
    expect(body.startTime).toBe(processStartTime(process.pid));
    // A lock naming a live daemon (here: a live process with its real start time) refuses.
    const other = bystander();
    release();
    writeFileSync(path, JSON.stringify(identify(other)));
    expect(() => acquireStateLock(path)).toThrow(StateDirLockedError);
    expect(() => acquireStateLock(path)).toThrow(`pid ${other}`);
  });

  it('takes over a lock naming a live but unrelated pid (start time differs)', () => {
    const path = lockPath();
    const pid = bystander();
    const recycled = { pid, startTime: String(Number(processStartTime(pid)) - 1), startedAt: new Date(0).toISOString() };
    writeFileSync(path, JSON.stringify(recycled));
    const release = acquireStateLock(path);
    expect((JSON.parse(readFileSync(path, 'utf8')) as { pid: number }).pid).toBe(process.pid);
    release();
    expect(existsSync(path)).toBe(false);
  });

  it('reads an old lock without a start time by its pid: dead is stale, live refuses', () => {
    const path = lockPath();
    writeFileSync(path, JSON.stringify({ pid: 0x3fffffff, startedAt: new Date(0).toISOString() }));
    acquireStateLock(path)();
    const pid = bystander();
    writeFileSync(path, JSON.stringify({ pid, startedAt: new Date(0).toISOString() }));
    expect(() => acquireStateLock(path)).toThrow(StateDirLockedError);
  });
});
