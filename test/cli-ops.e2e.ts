/**
 * The ops commands as real processes: start, status, runs, inspect, logs, restart, stop, and a
 * draining stop while a child is still working.
 */
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunInfo, SessionEvent, SessionHeader, StatusResult } from '../protocol/index.js';
import { CliSandbox, daemonPidsFor, EXAMPLES, HEAVY_TEST_MS, pidAlive, waitUntil } from './support/cli-harness.js';
import { RawPeer } from './support/raw-peer.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;
/** A literal (a path, an id) inside a RegExp. */
const lit = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('with no daemon running', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-ops-none-');
  });
  afterAll(() => box.cleanup());

  it('status exits 1 saying to run `subagentd start`; stop says nothing runs; neither starts a daemon', async () => {
    const [status, statusJson, stop] = await Promise.all([box.run(['status']), box.run(['status', '--json']), box.run(['stop'])]);
    expect(status.code).toBe(1);
    expect(status.stdout).toBe('');
    expect(status.stderr).toBe(`subagentd: no daemon at ${box.socket}: run \`subagentd start\`\n`);
    // With --json the error is one object on stdout, and nothing on stderr.
    expect(statusJson.code).toBe(1);
    expect(JSON.parse(statusJson.stdout)).toEqual({ error: { code: 'DAEMON_UNAVAILABLE', message: `no daemon at ${box.socket}: run \`subagentd start\`` } });
    expect(statusJson.stderr).toBe('');
    expect(stop.code).toBe(0);
    expect(stop.stdout).toBe(`no daemon running at ${box.socket}\n`);
    expect(daemonPidsFor(box.socket)).toEqual([]);
    expect(existsSync(box.socket)).toBe(false);
  });
});

describe('a daemon managed by start, restart and stop', () => {
  let box: CliSandbox;
  let pid: number | undefined;
  let epoch: string | undefined;

  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-ops-');
  });
  afterAll(async () => {
    if (daemonPidsFor(box.socket).length > 0) await box.run(['stop'], { timeoutMs: 15_000 });
    await box.cleanup();
  });

  it('start prints started and the pid; a second start says it is already running', async () => {
    const first = await box.run(['start']);
    expect(first.code, first.stderr).toBe(0);
    const m = /^subagentd started \(pid (\d+)\) on (.+)\n$/.exec(first.stdout);
    expect(m, first.stdout).not.toBeNull();
    pid = Number(m![1]);
    expect(m![2]).toBe(box.socket);
    expect(daemonPidsFor(box.socket)).toEqual([pid]);
    expect(existsSync(`${box.socket}.token`)).toBe(true);
    expect(existsSync(join(box.root, 'run', 'start.lock'))).toBe(false); // released once it listened

    const second = await box.run(['start']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(`subagentd already running (pid ${pid}) on ${box.socket}\n`);
    expect(daemonPidsFor(box.socket)).toEqual([pid]);
  });

  it('status shows the daemon as text and as JSON', async () => {
    const [text, json] = await Promise.all([box.run(['status']), box.run(['status', '--json'])]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^subagentd \\S+  pid ${pid}  up \\d+`));
    expect(text.stdout).toMatch(new RegExp(`socket\\s+${lit(box.socket)}\\n`));
    expect(text.stdout).toMatch(new RegExp(`state dir\\s+${lit(box.stateDir)}\\n`));
    expect(text.stdout).toMatch(/providers\s+spawn, fork\n/);
    expect(text.stdout).toMatch(/runs\s+starting 0 {2}running 0 {2}settled 0 {2}disposed 0\n/);
    // The default daemon polls after client traffic, and says what that has cost.
    expect(text.stdout).toMatch(/poll spin\s+250 µs windows: \d+ spun, \d+ caught a message, \d+ ms of CPU in all\n/);

    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout) as StatusResult;
    expect(status.daemon).toMatchObject({ name: 'subagentd', pid });
    expect(status.daemon.epoch).toEqual(expect.any(String));
    epoch = status.daemon.epoch;
    expect(status.runs).toEqual({ starting: 0, running: 0, settled: 0, disposed: 0 });
    expect(status.providers).toEqual(['spawn', 'fork']);
    expect(status.socket).toBe(box.socket);
    expect(status.stateDir).toBe(box.stateDir);
    expect(status.shuttingDown).toBe(false);
    expect(status.pollSpin).toMatchObject({ windowMicros: 250 });
    expect(status.connections).toBeGreaterThanOrEqual(1); // the status command's own
  });

  it('after a run: runs, inspect and logs show it, as tables, readable text and JSON', { timeout: HEAVY_TEST_MS }, async () => {
    const run = await box.run(['run', '--model', HELLO, '--json', 'Summarise this repository']);
    expect(run.code, run.stderr).toBe(0);
    const runId = (JSON.parse(run.stdout) as { runId: string }).runId;
    expect(runId).toMatch(/^run_/);

    const [runs, runsJson, inspect, inspectJson, logs] = await Promise.all([
      box.run(['runs']),
      box.run(['runs', '--json']),
      box.run(['inspect', runId]),
      box.run(['inspect', runId, '--json']),
      box.run(['logs']),
    ]);

    expect(runs.code, runs.stderr).toBe(0);
    const [header, ...rows] = runs.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^RUN\s+STATE\s+PROVIDER\s+STOP REASON\s+STARTED\s+SETTLED\s+WORKER$/);
    expect(rows).toHaveLength(1);
    // A single daemon executes its runs itself: WORKER is this host and the daemon's pid.
    expect(rows[0]).toMatch(new RegExp(`^${lit(runId)}\\s+disposed\\s+spawn\\s+completed\\s+\\d+s ago\\s+\\d+s ago\\s+${lit(hostname())}:${pid}$`));

    expect(runsJson.code, runsJson.stderr).toBe(0);
    const list = JSON.parse(runsJson.stdout) as RunInfo[];
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ runId, provider: 'spawn', state: 'disposed', stopReason: 'completed', mine: false });
    expect(list[0]!.worker).toEqual({ id: epoch, host: hostname(), pid });
    expect(list[0]!.usage).toMatchObject({ promptTokens: 3002, completionTokens: 123 });

    // inspect: the record, the session header and every event as a line a person reads.
    expect(inspect.code, inspect.stderr).toBe(0);
    const lines = inspect.stdout.split('\n');
    expect(lines[0]).toMatch(/^RUN\s+STATE/);
    expect(lines[1]).toMatch(new RegExp(`^${lit(runId)}\\s+disposed\\s+spawn\\s+completed`));
    expect(inspect.stdout).toMatch(new RegExp(`\\nsession \\S+  provider spawn  model ${lit(HELLO)}  depth 1\\n`));
    expect(inspect.stdout).toMatch(new RegExp(`\\ncwd ${lit(box.work)}  parent cli-\\d+-\\d+  created \\d{4}-`));
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d user: Summarise this repository\n/);
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d assistant: Let me look around the repository first\.\n {4}→ list_directory\(\{"path":"\."\}\)\n/);
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d {3}← list_directory: /);
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d {3}← read_file: /);
    expect(inspect.stdout).not.toMatch(/← read_file \(error\)/);
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d assistant: This repository is subagentd/);
    expect(inspect.stdout).toMatch(/\n\d\d:\d\d:\d\d turn end: completed\n/);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]); // no raw JSON in the text view

    expect(inspectJson.code, inspectJson.stderr).toBe(0);
    const detail = JSON.parse(inspectJson.stdout) as { run: RunInfo; header: SessionHeader; events: SessionEvent[] };
    expect(detail.run).toMatchObject({ runId, state: 'disposed', stopReason: 'completed', worker: { id: epoch, host: hostname(), pid } });
    expect(detail.header).toMatchObject({ provider: 'spawn', model: HELLO, cwd: box.work, delegationDepth: 1 });
    expect(detail.header.id).toBe(detail.run.id);
    const types = detail.events.map((e) => e.type);
    expect(types[0]).toBe('user/message');
    expect(types.filter((t) => t === 'assistant/message')).toHaveLength(3);
    expect(types.filter((t) => t === 'tool/result')).toHaveLength(2);
    expect(types.at(-1)).toBe('turn/end');

    // logs: the daemon's JSON log rendered as "time LEVEL message fields".
    expect(logs.code, logs.stderr).toBe(0);
    const logLines = logs.stdout.trimEnd().split('\n');
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) \S/);
    expect(logs.stdout).toMatch(new RegExp(`INFO  daemon listening socket=${lit(box.socket)} .*epoch=${lit(epoch ?? '')}`));

  });

  /** The daemon this describe manages; started again if an earlier step failed half-way. */
  async function running(): Promise<{ pid: number; epoch: string }> {
    const [live] = daemonPidsFor(box.socket);
    if (live !== undefined && live === pid && epoch !== undefined) return { pid: live, epoch };
    if (live === undefined) expect((await box.run(['start'])).code).toBe(0);
    const status = await box.status();
    expect(status).toBeDefined();
    return { pid: status!.daemon.pid, epoch: status!.daemon.epoch };
  }

  it('runs pages newest first with --limit and the printed --cursor; gc reports what it did', { timeout: HEAVY_TEST_MS }, async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const run = await box.run(['run', '--model', HELLO, '--json', `task ${i}`]);
      expect(run.code, run.stderr).toBe(0);
      ids.push((JSON.parse(run.stdout) as { runId: string }).runId);
    }
    const first = await box.run(['runs', '--limit', '2', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const page = (JSON.parse(first.stdout) as RunInfo[]).map((r) => r.runId);
    expect(page).toEqual([ids[2], ids[1]]);
    const cursor = /--cursor (\S+)/.exec(first.stderr)?.[1];
    expect(cursor).toBe(ids[1]);
    const second = await box.run(['runs', '--limit', '2', '--cursor', cursor!, '--json']);
    expect((JSON.parse(second.stdout) as RunInfo[])[0]?.runId).toBe(ids[0]);
    expect((await box.run(['runs', '--limit', '0'])).code).toBe(2);
    expect((await box.run(['runs', '--since', 'yesterday-ish'])).code).toBe(2);

    const gc = await box.run(['gc', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    const done = JSON.parse(gc.stdout) as { runsArchived: number; runsRemoved: number; sessionsRemoved: number; runsStored: number };
    expect(done.runsStored).toBeGreaterThanOrEqual(3);
    expect(done.runsRemoved).toBe(0);
  });

  it('restart drains, stops and starts a new daemon: new pid, new epoch', async () => {
    const before = await running();
    const oldPid = before.pid;
    epoch = before.epoch;
    const restart = await box.run(['restart', '--timeout', '5']);
    expect(restart.code, restart.stderr).toBe(0);
    expect(restart.stdout).toContain(`subagentd stopped (pid ${oldPid})`);
    const m = /subagentd started \(pid (\d+)\)/.exec(restart.stdout);
    expect(m, restart.stdout).not.toBeNull();
    pid = Number(m![1]);
    expect(pid).not.toBe(oldPid);
    expect(pidAlive(oldPid)).toBe(false);

    const status = await box.status();
    expect(status?.daemon.pid).toBe(pid);
    expect(status?.daemon.epoch).toEqual(expect.any(String));
    expect(status?.daemon.epoch).not.toBe(epoch);
    expect(daemonPidsFor(box.socket)).toEqual([pid]);
  });

  it('stop stops it: process gone, socket and token removed, state-dir lock released', async () => {
    pid = daemonPidsFor(box.socket)[0] ?? (await running()).pid;
    const stop = await box.run(['stop']);
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stdout).toBe(`subagentd stopped (pid ${pid})\n`);
    await waitUntil(() => !pidAlive(pid!), 5000, `daemon pid ${pid} to exit`);
    expect(existsSync(box.socket)).toBe(false);
    expect(existsSync(`${box.socket}.token`)).toBe(false);
    expect(existsSync(join(box.stateDir, 'daemon.lock'))).toBe(false);
    expect(existsSync(join(box.root, 'run', 'start.lock'))).toBe(false);
    expect(daemonPidsFor(box.socket)).toEqual([]);
  });
});

describe('stop --drain while a child is working', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-drain-');
  });
  afterAll(() => box.cleanup());

  it('refuses new starts with SHUTTING_DOWN, lets the running child finish, then the daemon exits', { timeout: HEAVY_TEST_MS }, async () => {
    // One quick step with a tool call, then a model step that takes a while: the child is
    // mid-run, waiting on its model, when the drain begins.
    const script = box.file('slow.json', {
      steps: [
        { text: 'looking first', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
        { delayMs: 6000, text: 'finished during the drain', finish: 'stop' }, // long enough for `stop` to start on a busy machine
      ],
    });
    const start = await box.run(['start']);
    expect(start.code, start.stderr).toBe(0);
    const pid = Number(/\(pid (\d+)\)/.exec(start.stdout)?.[1]);
    expect(pidAlive(pid)).toBe(true);

    const run = box.spawn(['run', '--model', `scripted:${script}`, 'take your time']);
    await run.waitForOutput((_out, err) => err.includes('← list_directory'), 15_000, 'the first tool result');

    const stop = box.spawn(['stop', '--drain', '--timeout', '15']);
    await stop.waitForOutput((out) => out.includes('draining'), 10_000, 'the drain to begin');
    expect(stop.stdout()).toBe(`draining (pid ${pid}): new starts are refused; running children get up to 15 s\n`);

    // While draining: the daemon still answers, says it is shutting down, and refuses a start.
    const peer = await RawPeer.initialized(box.socket, 'drain-probe');
    try {
      const status = await peer.request('daemon/status', {});
      expect(status.result).toMatchObject({ shuttingDown: true, daemon: { pid }, runs: { running: 1 } });
      const refused = await peer.request('subagent/start', {
        provider: 'spawn',
        prompt: [{ type: 'text', text: 'one more' }],
        parent: { sessionId: 'drain-probe', cwd: box.work },
        agentOptions: { model: HELLO },
      });
      expect(refused.result).toBeUndefined();
      expect(refused.error?.data?.code).toBe('SHUTTING_DOWN');
    } finally {
      peer.close();
    }

    // The running child was let finish: its `run` completed normally.
    const ran = await run.exited;
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('finished during the drain\n');

    const stopped = await stop.exited;
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.ms).toBeLessThan(14_000); // it ended when the child did, not at the 15 s timeout
    expect(stopped.stdout).toContain(`subagentd stopped (pid ${pid})\n`);
    await waitUntil(() => !pidAlive(pid), 5000, `daemon pid ${pid} to exit`);
    expect(existsSync(box.socket)).toBe(false);
    expect(existsSync(join(box.stateDir, 'daemon.lock'))).toBe(false);
  });
});
