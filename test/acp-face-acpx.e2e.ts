/**
 * A real ACP client drives `subagentd acp`: acpx 0.19.1 (from the registry, cached under $TMPDIR;
 * it needs Node >= 22.13). A one-shot `exec`, then a persistent acpx session whose two prompts
 * reach one pooled child (the second answer is the child's second scripted step, so the child
 * was continued, not started again). A package that cannot be installed fails the test: it never
 * skips.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliSandbox, cleanEnv, MAIN } from './support/cli-harness.js';
import { installCached, type CachedPackage } from './support/real-agents.js';

let box: CliSandbox;
let acpx: CachedPackage;

beforeAll(async () => {
  box = new CliSandbox('subagentd-acpx-');
  acpx = await installCached('acpx', '0.19.1');
}, 300_000);
afterAll(async () => {
  // acpx 0.19.1 keeps its queue sockets in /tmp/acpx-<sha256(home), 10 hex> whatever TMPDIR says
  // (queueSocketBaseDir in its dist/ipc-*.js); the home is this sandbox's, so that dir is ours.
  if (box) rmSync(join('/tmp', `acpx-${createHash('sha256').update(join(box.root, 'home')).digest('hex').slice(0, 10)}`), { recursive: true, force: true });
  await box?.cleanup();
});

function runAcpx(agent: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const home = join(box.root, 'home');
  mkdirSync(home, { recursive: true });
  const child = spawn(process.execPath, [join((acpx as CachedPackage).packageDir, 'dist', 'cli.js'), '--agent', agent, '--cwd', box.work, ...args], {
    cwd: box.work,
    env: cleanEnv({ HOME: home }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
}

it('acpx runs a prompt through subagentd acp, and keeps one pooled child across a persistent session', { timeout: 180_000 }, async () => {
  const script = box.file('child.json', { steps: [{ text: 'First answer.', finish: 'stop' }, { text: 'Second answer.', finish: 'stop' }] });
  const agent = [process.execPath, MAIN, 'acp', ...box.flags, '--model', `scripted:${script}`].join(' ');

  const once = await runAcpx(agent, ['--format', 'quiet', 'exec', 'Question one']);
  expect(once.code, once.stderr).toBe(0);
  expect(once.stdout.trim()).toBe('First answer.');

  const created = await runAcpx(agent, ['sessions', 'new']);
  expect(created.code, created.stderr).toBe(0);
  const sessionId = created.stdout.trim();
  expect(sessionId).toMatch(/^acp_/);
  const first = await runAcpx(agent, ['--format', 'quiet', 'First question']);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout.trim()).toBe('First answer.');
  const second = await runAcpx(agent, ['--format', 'quiet', 'Second question']);
  expect(second.code, second.stderr).toBe(0);
  expect(second.stdout.trim()).toBe('Second answer.');
  const closed = await runAcpx(agent, ['sessions', 'close']);
  expect(closed.code, closed.stderr).toBe(0);
});
