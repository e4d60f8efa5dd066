/**
 * Logs that help: `--log-level debug` reaches the file, every run writes one line at its start
 * and one at its end (run id, provider, owner, duration, stop reason), no line has two `pid`
 * keys, `logs --run ID` (and with --follow) shows only that run, and `logs | head` ends quietly.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunInfo } from '../protocol/index.js';
import { CliSandbox, cleanEnv, HEAVY_TEST_MS, MAIN } from './support/cli-harness.js';

type LogLine = Record<string, unknown> & { level: number; msg: string };

describe('the daemon log', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-logs-');
  });
  afterAll(() => box.cleanup());

  it('debug level, one start and one end line per run, one pid key, and --run filters (also following)', { timeout: HEAVY_TEST_MS }, async () => {
    const daemon = box.spawn(['daemon', '--log-level', 'debug'], { timeoutMs: 120_000 });
    await daemon.waitForOutput((_o, err) => err.includes('listening on'), 20_000, 'the daemon to listen');
    const quick = box.file('quick.json', { steps: [{ text: 'quick answer', finish: 'stop' }] });
    const slow = box.file('slow.json', { steps: [{ delayMs: 2500, text: 'slow answer', finish: 'stop' }] });

    const first = await box.run(['run', '--json', '--model', `scripted:${quick}`, 'one']);
    expect(first.code, first.stderr).toBe(0);
    const firstId = (JSON.parse(first.stdout) as { runId: string }).runId;

    // A second run, followed from while it works.
    const second = box.spawn(['run', '--json', '--model', `scripted:${slow}`, 'two']);
    let secondId: string | undefined;
    for (let i = 0; i < 100 && secondId === undefined; i++) {
      const runs = await box.run(['runs', '--json', '--state', 'running']);
      secondId = (JSON.parse(runs.stdout || '[]') as RunInfo[])[0]?.runId;
    }
    expect(secondId).toBeDefined();
    const follow = box.spawn(['logs', '--follow', '--json', '--run', secondId!], { timeoutMs: 60_000 });
    await follow.waitForOutput((out) => out.includes('"run ended"'), 30_000, "the second run's end line");
    follow.child.kill('SIGINT');
    expect((await follow.exited).code).toBe(0);
    const followed = follow.stdout().trim().split('\n').map((l) => JSON.parse(l) as LogLine);
    expect(followed.every((l) => l['runId'] === secondId)).toBe(true);
    expect(followed.map((l) => l.msg)).toContain('run started');
    expect((await second.exited).code).toBe(0);

    const text = readFileSync(join(box.stateDir, 'daemon.log'), 'utf8');
    const lines = text.trim().split('\n');
    for (const line of lines) expect(line.match(/"pid":/g) ?? [], line).toHaveLength(1);
    const parsed = lines.map((l) => JSON.parse(l) as LogLine);
    expect(parsed.some((l) => l.level === 20)).toBe(true); // debug lines are written
    for (const runId of [firstId, secondId!]) {
      const started = parsed.filter((l) => l.msg === 'run started' && l['runId'] === runId);
      const ended = parsed.filter((l) => l.msg === 'run ended' && l['runId'] === runId);
      expect(started).toHaveLength(1);
      expect(ended).toHaveLength(1);
      expect(started[0]).toMatchObject({ level: 30, provider: 'spawn', owner: expect.any(String) });
      expect(ended[0]).toMatchObject({ level: 30, provider: 'spawn', owner: started[0]!['owner'], stopReason: 'completed', durationMs: expect.any(Number) });
    }

    const [onlyFirst, onlyFirstText] = await Promise.all([
      box.run(['logs', '--json', '--run', firstId]),
      box.run(['logs', '--run', firstId]),
    ]);
    const firstLines = onlyFirst.stdout.trim().split('\n').map((l) => JSON.parse(l) as LogLine);
    expect(firstLines.every((l) => l['runId'] === firstId)).toBe(true);
    expect(firstLines.map((l) => l.msg)).toEqual(expect.arrayContaining(['run started', 'run ended']));
    expect(onlyFirstText.stdout).toMatch(/INFO  run ended .*stopReason=completed/);
    expect(onlyFirstText.stdout).not.toContain(secondId!);
  });

  it('`logs | head -1` ends quietly with a log larger than a pipe holds', async () => {
    const stateDir = join(box.root, 'big-state');
    mkdirSync(stateDir, { mode: 0o700 });
    const line = JSON.stringify({ level: 30, time: Date.now(), pid: 1, msg: 'filler line for a long log' });
    writeFileSync(join(stateDir, 'daemon.log'), `${line}\n`.repeat(20_000));
    const child = spawn('bash', ['-o', 'pipefail', '-c', `"${process.execPath}" "${MAIN}" logs --state-dir "${stateDir}" | head -1`], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stdout).toMatch(/INFO  filler line for a long log\n$/);
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
