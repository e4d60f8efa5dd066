/**
 * Auto-start from the command line: concurrent commands against a fresh socket start exactly one
 * daemon; the start lock beside the socket is judged by its holder's liveness and age; a daemon
 * that dies at start is reported with its exit and last words, and is not auto-started forever.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { CliSandbox, daemonPidsFor, EXAMPLES, HEAVY_TEST_MS, pidAlive, waitUntil } from './support/cli-harness.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;

const boxes: CliSandbox[] = [];
function sandbox(): CliSandbox {
  const box = new CliSandbox('subagentd-cli-autostart-');
  boxes.push(box);
  return box;
}
afterEach(async () => {
  for (const box of boxes.splice(0)) await box.cleanup();
});

const startsOf = (box: CliSandbox): number[] => {
  const text = box.readFile(join(box.root, 'run', 'starts.json'));
  return text ? (JSON.parse(text) as number[]) : [];
};
const startLock = (box: CliSandbox): string => join(box.root, 'run', 'start.lock');
const stderrLog = (box: CliSandbox): string => join(box.stateDir, 'daemon.stderr.log');

/** Stops the daemon by signal and waits for it to be gone. */
async function terminate(pid: number): Promise<void> {
  process.kill(pid, 'SIGTERM');
  await waitUntil(() => !pidAlive(pid), 5000, `daemon pid ${pid} to exit`);
}

it('three runs started at the same moment against a fresh socket start exactly one daemon', { timeout: HEAVY_TEST_MS }, async () => {
  const box = sandbox();
  const runs = await Promise.all(
    ['one', 'two', 'three'].map((name) => box.run(['run', '--model', HELLO, '--quiet', `Summarise this repository (${name})`])),
  );
  for (const r of runs) {
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('This repository is subagentd');
  }
  const pids = daemonPidsFor(box.socket);
  expect(pids).toHaveLength(1);
  const status = await box.status();
  expect(status?.daemon.pid).toBe(pids[0]);
  // Nobody else tried: one recorded start, one daemon that listened, none that lost a race.
  expect(startsOf(box)).toEqual([]); // a start that came up is not held against the crash-loop bound
  const log = box.readFile(stderrLog(box));
  expect(log.match(/listening on/g)).toHaveLength(1);
  expect(log).not.toMatch(/^subagentd: /m);
  expect(status?.runs.disposed).toBe(3);
  expect(existsSync(startLock(box))).toBe(false);
});

it('a daemon that dies at start: the error shows its exit, its last words and the next step; auto-start gives up after 3, an explicit start still tries', { timeout: HEAVY_TEST_MS }, async () => {
  const box = sandbox();
  // Valid for the command (so it gets as far as starting a daemon), fatal for the daemon.
  const config = box.file('config.json', { providerModules: ['./no-such-provider-module.js'] });
  const log = stderrLog(box);
  // Three at once: they take the start lock in turn, and each one's daemon dies.
  const attempts = await Promise.all([1, 2, 3].map(() => box.run(['run', '--config', config, '--model', HELLO, 'hi'])));
  for (const r of attempts) {
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`subagentd: the daemon exited (code 1) before it listened on ${box.socket}; its last words, from ${log}:\n  | `);
    expect(r.stderr).toContain('no-such-provider-module.js'); // the cause itself, not just where to look
    expect(r.stderr).toMatch(/\nfix the cause above, then run `subagentd start`\n$/);
  }
  expect(startsOf(box)).toHaveLength(3);

  // A fourth `run` is held back by the crash-loop guard, and says why with the same last words.
  const refusedRun = await box.run(['run', '--config', config, '--model', HELLO, '--json', 'hi']);
  expect(refusedRun.code).toBe(1);
  const { error } = JSON.parse(refusedRun.stdout) as { error: { code: string; message: string; log: string; logTail: string[] } };
  expect(error.code).toBe('DAEMON_UNAVAILABLE');
  expect(error.message).toContain('the daemon was started 3 times in the last 60 s and did not stay up; not starting it again automatically');
  expect(error.log).toBe(log);
  expect(error.logTail.join('\n')).toContain('no-such-provider-module.js');
  expect(startsOf(box)).toHaveLength(3);

  // An explicit start is never held back: it tries, and reports the daemon's own failure.
  const explicit = await box.run(['start', '--config', config]);
  expect(explicit.code).toBe(1);
  expect(explicit.stderr).toContain('the daemon exited (code 1) before it listened');
  expect(explicit.stderr).toContain('no-such-provider-module.js');
  expect(startsOf(box)).toHaveLength(4);
  expect(daemonPidsFor(box.socket)).toEqual([]);
  expect(existsSync(box.socket)).toBe(false);
  expect(existsSync(startLock(box))).toBe(false);
});

it('a config file the command itself cannot accept is reported before any daemon is started', async () => {
  const box = sandbox();
  const config = box.file('config.json', { notASetting: true });
  const r = await box.run(['run', '--config', config, '--model', HELLO, 'hi']);
  expect(r.code).toBe(1);
  expect(r.stderr).toBe(`subagentd: invalid config ${config}: /notASetting is not a known setting\n`);
  expect(startsOf(box)).toEqual([]);
  expect(existsSync(box.stateDir)).toBe(false);
});

it('the start lock: a dead or stale holder is taken over; a live, recent one is waited for', { timeout: HEAVY_TEST_MS }, async () => {
  const box = sandbox();
  const lock = startLock(box);

  // A holder whose process is gone.
  const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
  expect(pidAlive(dead)).toBe(false);
  writeFileSync(lock, JSON.stringify({ pid: dead, at: Date.now() }));
  const first = await box.run(['start']);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toMatch(/^subagentd started \(pid \d+\)/);
  expect(first.ms).toBeLessThan(12_000); // not the 15 s wait for a live starter
  expect(existsSync(lock)).toBe(false);
  await terminate(daemonPidsFor(box.socket)[0]!);

  // A live holder (this process) whose lock is older than any start takes.
  writeFileSync(lock, JSON.stringify({ pid: process.pid, at: Date.now() - 120_000 }));
  const second = await box.run(['start']);
  expect(second.code, second.stderr).toBe(0);
  expect(second.stdout).toMatch(/^subagentd started \(pid \d+\)/);
  expect(existsSync(lock)).toBe(false);
  await terminate(daemonPidsFor(box.socket)[0]!);

  // A live, recent holder: the command waits for it rather than racing it, and goes on once
  // the holder lets go.
  const other = sandbox();
  const otherLock = startLock(other);
  writeFileSync(otherLock, JSON.stringify({ pid: process.pid, at: Date.now() }));
  // Its access time far in the past: the command's first read of the lock moves it (relatime),
  // which tells this test that the command has got as far as judging the lock.
  utimesSync(otherLock, 0, new Date());
  const waiting = other.spawn(['start']);
  const judged = await waitUntil(() => statSync(otherLock).atimeMs > 0, 15_000, 'the command to read the start lock').then(
    () => true,
    () => false, // a noatime file system: fall back to giving it time
  );
  await new Promise((r) => setTimeout(r, judged ? 1000 : 4000)); // ten turns of its 100 ms wait, or more
  expect(waiting.child.exitCode).toBeNull();
  expect(daemonPidsFor(other.socket)).toEqual([]);
  expect(JSON.parse(readFileSync(otherLock, 'utf8'))).toMatchObject({ pid: process.pid }); // still ours
  rmSync(otherLock);
  const third = await waiting.exited;
  expect(third.code, third.stderr).toBe(0);
  expect(third.stdout).toMatch(/^subagentd started \(pid \d+\)/);
  expect(daemonPidsFor(other.socket)).toHaveLength(1);
});

// Starts of daemons that came up and stayed up are not a crash loop: a user who stops and starts
// the daemon a few times in a minute must not be told it "did not stay up".
it('starts of daemons that stayed up do not count toward the crash-loop bound', { timeout: HEAVY_TEST_MS }, async () => {
  const box = sandbox();
  for (let i = 1; i <= 4; i++) {
    const r = await box.run(['start']);
    expect(r.stderr, `start #${i}`).toBe('');
    expect(r.code, `start #${i}`).toBe(0);
    const [pid] = daemonPidsFor(box.socket);
    expect(pid).toBeDefined();
    await terminate(pid!);
  }
});

it('a state dir that cannot be written is one line naming the path and the errno, not a stack', async () => {
  const box = sandbox();
  const blocker = box.file('not-a-directory', 'a file where the state dir should go\n');
  const stateDir = join(blocker, 'state');
  const [text, json] = await Promise.all([box.run(['start', '--state-dir', stateDir]), box.run(['start', '--json', '--state-dir', stateDir])]);
  expect(text.code).toBe(1);
  expect(text.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(text.stderr).toMatch(new RegExp(`^subagentd: cannot start the daemon: ${stateDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not writable \\(ENOTDIR: `));
  expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'DAEMON_UNAVAILABLE', message: expect.stringContaining('ENOTDIR') } });
  expect(daemonPidsFor(box.socket)).toEqual([]);
});
