/**
 * `subagentd run` as a person or a script uses it: real CLI processes against a private socket and
 * state dir, the daemon started on demand by the first command and shared by the next ones.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliSandbox, daemonPidsFor, EXAMPLES, pidAlive } from './support/cli-harness.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;
const HELLO_ANSWER = 'This repository is subagentd: a daemon that hosts child agents';

interface RunJson {
  runId: string;
  provider: string;
  stopReason: string;
  output: string;
  structured: unknown;
  usage: unknown;
}

/** Exactly one JSON object on stdout, nothing else. */
function onlyJson(stdout: string): RunJson {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines, `stdout should be one JSON line, got:\n${stdout}`).toHaveLength(1);
  const value = JSON.parse(lines[0]!) as unknown;
  expect(value).toBeTypeOf('object');
  expect(Array.isArray(value)).toBe(false);
  return value as RunJson;
}

describe('subagentd run', () => {
  let box: CliSandbox;
  let daemonPid: number | undefined;
  let epoch: string | undefined;

  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-run-');
  });
  afterAll(async () => {
    await box.run(['stop'], { timeoutMs: 15_000 });
    await box.cleanup();
  });

  it('auto-starts the daemon from a fresh state, streams progress on stderr and prints the answer on stdout', async () => {
    expect(daemonPidsFor(box.socket)).toEqual([]);
    const result = await box.run(['run', '--model', HELLO, 'Summarise this repository']);
    expect(result.code, result.stderr).toBe(0);
    // The answer, and only the answer, on stdout.
    expect(result.stdout.trim().startsWith(HELLO_ANSWER)).toBe(true);
    expect(result.stdout).not.toContain('list_directory');
    // Progress for a person: the child's text, its tool calls and results, the turn's end.
    expect(result.stderr).toContain('Let me look around the repository first.');
    expect(result.stderr).not.toContain(HELLO_ANSWER); // the answer is on stdout only, never repeated here
    expect(result.stderr).toContain('→ list_directory {"path":"."}');
    expect(result.stderr).toMatch(/← list_directory\n/);
    expect(result.stderr).toMatch(/← read_file\n/); // the sandbox has a README.md: not "failed"
    expect(result.stderr).toContain('· turn ended: completed');
    expect(result.stderr).not.toMatch(/^subagentd: /m); // no error line

    const status = await box.status();
    expect(status).toBeDefined();
    daemonPid = status!.daemon.pid;
    epoch = status!.daemon.epoch;
    expect(daemonPidsFor(box.socket)).toEqual([daemonPid]);
    expect(status!.socket).toBe(box.socket);
    expect(status!.stateDir).toBe(box.stateDir);
  });

  it('--json prints exactly one object with runId, provider, stopReason, output, structured and usage, and reuses the daemon', async () => {
    const result = await box.run(['run', '--model', HELLO, '--json', 'Summarise this repository']);
    expect(result.code, result.stderr).toBe(0);
    const out = onlyJson(result.stdout);
    expect(Object.keys(out).sort()).toEqual(['output', 'provider', 'runId', 'stopReason', 'structured', 'usage']);
    expect(out.runId).toMatch(/^run_/);
    expect(out.provider).toBe('spawn');
    expect(out.stopReason).toBe('completed');
    expect(out.output.startsWith(HELLO_ANSWER)).toBe(true);
    expect(out.structured).toBeNull();
    // hello.json's three steps: 412 + 690 + 1900 prompt tokens, 38 + 21 + 64 completion tokens.
    expect(out.usage).toMatchObject({ promptTokens: 3002, completionTokens: 123 });
    // --json is for scripts: no progress stream on stderr.
    expect(result.stderr).not.toContain('list_directory');

    // The same daemon served it: same pid, same epoch, still the only one on this socket.
    const status = await box.status();
    expect(daemonPid).toBeDefined();
    expect(status?.daemon.pid).toBe(daemonPid);
    expect(status?.daemon.epoch).toBe(epoch);
    expect(daemonPidsFor(box.socket)).toEqual([daemonPid]);
  });

  it('--schema returns the structured value the script reported', async () => {
    const result = await box.run([
      'run',
      '--schema',
      join(EXAMPLES, 'summary-schema.json'),
      '--model',
      `scripted:${join(EXAMPLES, 'structured.json')}`,
      '--json',
      'summarise',
    ]);
    expect(result.code, result.stderr).toBe(0);
    const out = onlyJson(result.stdout);
    expect(out.stopReason).toBe('completed');
    expect(out.structured).toEqual({ summary: 'subagentd hosts child agents behind JSON-RPC', files: 3 });
  });

  it('a relative scripted path is resolved against the command\'s cwd, not the daemon\'s', async () => {
    const script = box.file('work/relative.json', { steps: [{ text: 'from a relative script', finish: 'stop' }] });
    expect(script.startsWith(box.work)).toBe(true);
    const result = await box.run(['run', '--model', 'scripted:relative.json', '--quiet', 'go'], { cwd: box.work });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('from a relative script\n');
    expect(result.stderr).toBe(''); // --quiet: no progress
  });

  it('a child stopped by the token limit exits 1 with stopReason max-tokens', async () => {
    const script = box.file('length.json', {
      steps: [{ text: 'a partial answer', finish: 'length', usage: { promptTokens: 5, completionTokens: 7 } }],
    });
    const [json, text] = await Promise.all([
      box.run(['run', '--model', `scripted:${script}`, '--json', 'write a long essay']),
      box.run(['run', '--model', `scripted:${script}`, 'write a long essay']),
    ]);
    expect(json.code, json.stderr).toBe(1);
    const out = onlyJson(json.stdout);
    expect(out.stopReason).toBe('max-tokens');
    expect(out.output).toBe('a partial answer');
    expect(out.usage).toMatchObject({ promptTokens: 5, completionTokens: 7 });

    expect(text.code).toBe(1);
    expect(text.stdout).toBe('a partial answer\n');
    expect(text.stderr).toContain('the child ended with "max-tokens"');
  });

  it('with no model configured, exits 1 and says how to configure one', async () => {
    const result = await box.run(['run', 'Summarise this repository']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('no model is configured');
    expect(result.stderr).toContain('DEEPSEEK_API_KEY');
    expect(result.stderr).toContain('--model scripted:FILE');
    expect(result.stderr).not.toContain('    at '); // a message, not a stack trace
  });

  it('an unknown provider exits 1 naming it', async () => {
    const result = await box.run(['run', '--provider', 'no-such-provider', '--model', HELLO, 'hi']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain("no provider named 'no-such-provider'");
    expect(result.stderr).toContain('spawn'); // and what is available
    expect(result.stderr).not.toContain('    at ');
  });

  it('Ctrl-C cancels the child: exit 1 with the run ended "aborted"', async () => {
    const script = box.file('slow.json', {
      steps: [
        { text: 'looking first', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
        { delayMs: 30_000, text: 'never shown', finish: 'stop' },
      ],
    });
    const run = box.spawn(['run', '--model', `scripted:${script}`, 'take your time']);
    await run.waitForOutput((_out, err) => err.includes('← list_directory'), 15_000, 'the first tool result');
    run.child.kill('SIGINT');
    const result = await run.exited;
    expect(result.code).toBe(1);
    expect(result.ms).toBeLessThan(20_000); // not the scripted 30 s
    expect(result.stderr).toContain('cancelling the child (Ctrl-C again to quit at once)');
    expect(result.stderr).toContain('· turn ended: aborted');
    expect(result.stderr).toContain('subagentd: the child ended with "aborted"');
    expect(result.stdout).not.toContain('never shown');
  });

  it('all of it was served by the one daemon started first', () => {
    expect(daemonPid).toBeDefined();
    expect(pidAlive(daemonPid!)).toBe(true);
    expect(daemonPidsFor(box.socket)).toEqual([daemonPid]);
    // One "listening" line in the daemon's own stderr log: one daemon was ever started.
    expect(box.readFile(join(box.stateDir, 'daemon.stderr.log')).match(/listening on/g)).toHaveLength(1);
  });
});
