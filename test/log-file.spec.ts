/**
 * The daemon log's writer (daemon/ops/log-file.ts): lines are written once per event-loop turn;
 * an exit that runs JavaScript writes what is queued; a SIGKILL loses only the turn it cut.
 * The exit cases run the built writer in a real child process.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { LogFile } from '../daemon/ops/log-file.js';
import { createLogger } from '../daemon/ops/logger.js';
import { makeTempDir, REPO } from './support/daemon-process.js';

const run = promisify(execFile);
const BUILT = join(REPO, 'dist', 'daemon', 'ops', 'log-file.js');
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const logPath = (): string => {
  const dir = makeTempDir('subagentd-log-');
  dirs.push(dir);
  return join(dir, 'logs', 'daemon.log');
};
const read = (path: string): string => (existsSync(path) ? readFileSync(path, 'utf8') : '');
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs `body` (ES module code with `file`, a LogFile on `path`, and `turn()`) in a child node. */
async function inChild(path: string, body: string): Promise<{ signal: string | null }> {
  const script =
    `const { LogFile } = await import(${JSON.stringify(BUILT)});\n` +
    `const file = new LogFile(${JSON.stringify(path)}, undefined, 1 << 20);\n` +
    `const turn = () => new Promise((resolve) => setImmediate(resolve));\n${body}`;
  try {
    await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 10_000 });
    return { signal: null };
  } catch (error) {
    return { signal: (error as { signal?: string }).signal ?? null };
  }
}

describe('LogFile', () => {
  it('writes a turn’s lines together after the turn, in order', async () => {
    const path = logPath();
    const file = new LogFile(path, undefined, 1 << 20);
    file.write('one\n');
    file.write('two\n');
    expect(read(path)).toBe(''); // nothing per line
    await turn();
    expect(read(path)).toBe('one\ntwo\n');
    file.write('three\n');
    file.flushSync();
    expect(read(path)).toBe('one\ntwo\nthree\n');
  });

  it('a logger’s flush() writes the queued lines at once', () => {
    const path = logPath();
    const log = createLogger({ file: path });
    log.info({ runId: 'r1' }, 'run started');
    log.flush();
    expect(JSON.parse(read(path))).toMatchObject({ msg: 'run started', runId: 'r1', pid: process.pid });
  });

  it('process.exit in the turn that logged still writes its lines', async () => {
    const path = logPath();
    const { signal } = await inChild(path, `file.write('first\\n'); await turn(); file.write('last words\\n'); process.exit(3);`);
    expect(signal).toBeNull();
    expect(read(path)).toBe('first\nlast words\n');
  });

  it('a SIGKILL loses at most the lines of the turn it cut', async () => {
    const path = logPath();
    const { signal } = await inChild(path, `file.write('kept\\n'); await turn(); await turn(); file.write('lost\\n'); process.kill(process.pid, 'SIGKILL');`);
    expect(signal).toBe('SIGKILL');
    expect(read(path)).toBe('kept\n');
  });
});
