/**
 * `run` on a terminal: a live status line on stderr (rewritten in place: tool calls, tokens) and
 * the answer printed once; piped, no control codes anywhere and stdout holds the answer only.
 * The terminal is a real pty from util-linux `script`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliSandbox, cleanEnv, EXAMPLES, HEAVY_TEST_MS, MAIN } from './support/cli-harness.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;
const ANSWER = 'This repository is subagentd';

describe('run progress', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-progress-');
  });
  afterAll(() => box.cleanup());

  it('on a TTY: one live status line, the answer once', { timeout: HEAVY_TEST_MS }, async () => {
    const command = [process.execPath, MAIN, 'run', ...box.flags, '--model', HELLO, 'Summarise this repository'].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qec', `stty cols 200; ${command}`, '/dev/null'], { cwd: box.work, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let terminal = '';
    child.stdout.on('data', (d: Buffer) => (terminal += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
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
