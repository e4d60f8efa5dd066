/**
 * `run` on a terminal: a live status line on stderr (rewritten in place: tool calls, tokens, the
 * place in the daemon's queue, an ACP agent starting, model retries) and the answer printed once;
 * piped, no control codes anywhere and stdout holds the answer only. The terminal is a real pty
 * from util-linux `script`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SDK_AGENT } from './fixtures/acp-harness.js';
import { errorResponse, startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { CliSandbox, cleanEnv, EXAMPLES, FIXTURE_PROVIDERS, HEAVY_TEST_MS, MAIN, waitUntil } from './support/cli-harness.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;
const ANSWER = 'This repository is subagentd';

/** `subagentd run …` on a pty of 200 columns: everything the terminal got, and the exit code. */
function runOnTerminal(box: CliSandbox, args: readonly string[]): { output: () => string; exited: Promise<number | null> } {
  const command = [process.execPath, MAIN, 'run', ...box.flags, ...args].map((a) => `'${a}'`).join(' ');
  const child = spawn('script', ['-qec', `stty cols 200; ${command}`, '/dev/null'], { cwd: box.work, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let terminal = '';
  child.stdout.on('data', (d: Buffer) => (terminal += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => (clearTimeout(killer), resolve(code))));
  return { output: () => terminal, exited };
}

describe('run progress', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-progress-');
  });
  afterAll(() => box.cleanup());

  it('on a TTY: one live status line, the answer once', { timeout: HEAVY_TEST_MS }, async () => {
    const run = runOnTerminal(box, ['--model', HELLO, 'Summarise this repository']);
    const code = await run.exited;
    const terminal = run.output();
    expect(code, terminal).toBe(0);
    expect(terminal.split(ANSWER)).toHaveLength(2); // printed once
    expect(terminal).toContain('\r\x1b[2K'); // the line is rewritten in place
    expect(terminal).toMatch(/2 tool calls \(last: read_file\)/);
    expect(terminal).toMatch(/tokens 3002 in \/ 123 out/);
    // The status line is erased before the answer, which starts on a clean line.
    expect(terminal).toMatch(new RegExp(`\\r\\x1b\\[2K${ANSWER}`));
  });

  it('piped: no control codes, stdout is the answer alone', { timeout: HEAVY_TEST_MS }, async () => {
    const piped = await box.run(['run', '--model', HELLO, 'Summarise this repository']);
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout.startsWith(ANSWER)).toBe(true);
    expect(piped.stdout.split(ANSWER)).toHaveLength(2);
    expect(piped.stdout + piped.stderr).not.toContain('\x1b');
  });
});

describe('run progress while it waits', () => {
  let box: CliSandbox;
  let model: ChatCompletionsServer;
  beforeAll(async () => {
    box = new CliSandbox('subagentd-cli-waits-');
    model = await startChatCompletionsServer();
    const config = box.file('config.json', {
      providerModules: [FIXTURE_PROVIDERS],
      limits: { maxConcurrentRuns: 1 },
      model: { baseUrl: model.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', maxRetries: 1 },
      providers: [{ type: 'acp', name: 'sdk-agent', command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'reply' }, initializeTimeoutMs: 5000 }],
    });
    const started = await box.run(['start', '--config', config], { env: { TEST_KEY: 'sk-cli-waits' } });
    expect(started.code, started.stderr).toBe(0);
  }, HEAVY_TEST_MS);
  afterAll(async () => {
    await box?.cleanup();
    await model?.close();
  });

  it('on a TTY: the place in the queue, then the answer once', { timeout: HEAVY_TEST_MS }, async () => {
    // A run that holds the daemon's one slot until Ctrl-C cancels it.
    const holder = box.spawn(['run', '--provider', 'echo', '--quiet', 'hang']);
    await waitUntil(async () => (await box.status())?.admission.running === 1, 20_000, 'the holder to take the slot');
    const waiting = runOnTerminal(box, ['--provider', 'echo', 'echo served after the wait']);
    await waitUntil(() => waiting.output().includes('queued (1st in line)'), 20_000, 'the queue position on the status line');
    holder.child.kill('SIGINT');
    expect((await holder.exited).code).toBe(1); // cancelled: the child did not complete
    const code = await waiting.exited;
    const terminal = waiting.output();
    expect(code, terminal).toBe(0);
    expect(terminal).toMatch(new RegExp(String.raw`\r\x1b\[2K\d+s queued \(1st in line\)`));
    // Then admitted: the place in line gives way to the start.
    expect(terminal.indexOf('queued (1st in line)')).toBeLessThan(terminal.indexOf('starting the echo child'));
    expect(terminal.split('echo served after the wait')).toHaveLength(2);
  });

  it('on a TTY: an ACP agent starting', { timeout: HEAVY_TEST_MS }, async () => {
    const run = runOnTerminal(box, ['--provider', 'sdk-agent', 'hello']);
    const code = await run.exited;
    const terminal = run.output();
    expect(code, terminal).toBe(0);
    const spawning = terminal.indexOf('starting ACP agent… (spawning)');
    expect(spawning, terminal).toBeGreaterThan(0);
    expect(terminal.indexOf('starting ACP agent… (initializing)')).toBeGreaterThan(spawning);
  });

  it("on a TTY: a model retry with the server's delay; piped: the same as a plain line", { timeout: HEAVY_TEST_MS }, async () => {
    model.enqueue(errorResponse(429, 'Rate limit reached', { 'retry-after': '1' }), textResponse(['Answered after one retry.']));
    const run = runOnTerminal(box, ['say something']);
    const code = await run.exited;
    const terminal = run.output();
    expect(code, terminal).toBe(0);
    expect(terminal).toMatch(new RegExp(String.raw`\r\x1b\[2K\d+s model busy, retrying in 1\.0 s \(attempt 2\)`));
    expect(terminal.split('Answered after one retry.')).toHaveLength(2);

    model.enqueue(errorResponse(503, 'Overloaded', { 'retry-after': '1' }), textResponse(['Answered again.']));
    const piped = await box.run(['run', 'say something']);
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout).toBe('Answered again.\n');
    expect(piped.stderr).toContain('  ! model busy, retrying in 1.0 s (attempt 2)\n');
    expect(piped.stdout + piped.stderr).not.toContain('\x1b');
  });
});
