/**
 * The warm ACP pool with a real agent: Qwen Code 0.24.4 (`qwen --acp`, from the registry, cached
 * under $TMPDIR) as the provider's command, its model a local chat-completions server. The start
 * takes the process that was spawned and initialized before it (same pid), Qwen answers the
 * prompt through the fake model, a replacement is warmed, and nothing is left running at the end.
 * A package that cannot be installed fails the test: it never skips.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DaemonProvider, DaemonRun } from '../daemon/provider.js';
import { fakeHost, processGone, provider, request, textOf, waitFor, type Workspace } from './fixtures/acp-harness.js';
import { startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { installCached, writeQwenSettings, type CachedPackage } from './support/real-agents.js';

const ANSWER = 'Warm Qwen answered.';

let qwen: CachedPackage;
let model: ChatCompletionsServer;
let root: string;
let pool: DaemonProvider | undefined;
const pids: number[] = [];

/** This test process's children running Qwen, from /proc (the kernel's view, not the pool's). */
function qwenChildren(): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) !== process.pid || state === 'Z') continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('cli-entry.js')) found.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

beforeAll(async () => {
  model = await startChatCompletionsServer({ fallback: () => textResponse([ANSWER]) });
  qwen = await installCached('@qwen-code/qwen-code', '0.24.4');
  root = mkdtempSync(join(tmpdir(), 'acp-warm-qwen-'));
}, 300_000);
afterAll(async () => {
  await pool?.close?.();
  await model?.close();
  const left = pids.filter((pid) => !processGone(pid));
  for (const pid of left) process.kill(-pid, 'SIGKILL');
  if (root) rmSync(root, { recursive: true, force: true });
  expect(left, 'Qwen processes left behind').toEqual([]);
});

it('a start takes the pre-initialized Qwen Code process', { timeout: 180_000 }, async () => {
  const home = join(root, 'home');
  const work = join(root, 'work');
  writeQwenSettings(home);
  mkdirSync(work);
  pool = provider({
    name: 'qwen',
    command: process.execPath,
    args: [join(qwen.packageDir, 'cli-entry.js'), '--acp'],
    // TMPDIR under the test's root: Qwen Code's peer-socket dir (qwen-socks-<nonce>) goes with it.
    env: { HOME: home, TMPDIR: root, OPENAI_API_KEY: 'sk-fake', OPENAI_BASE_URL: model.baseUrl, OPENAI_MODEL: 'fake-model', NO_COLOR: '1' },
    initializeTimeoutMs: 60_000,
    disposeGraceMs: { stdin: 3_000, term: 2_000 },
    warm: 1,
  });
  const p = pool;
  await waitFor(() => p.processes!().ready === 1 || p.processes!().lastError, 90_000, 'a warm Qwen process');
  expect(p.processes!().lastError).toBeUndefined();
  const warmPids = qwenChildren();
  expect(warmPids).toHaveLength(1);
  pids.push(...warmPids);

  const ws: Workspace = { root: work, outside: root, recordPath: join(root, 'none'), cleanup: async () => {} };
  const run = (await p.start(request(ws, fakeHost(), { prompt: [{ type: 'text', text: 'Say something.' }] }))) as DaemonRun & { pid: number };
  expect(run.pid).toBe(warmPids[0]);
  expect(p.processes!()).toMatchObject({ warmStarts: 1, coldStarts: 0, inUse: 1 });
  const result = await run.result;
  expect(result.stopReason, result.diagnostic).toBe('completed');
  expect(textOf(result.output)).toContain(ANSWER);
  expect(model.requests.length).toBeGreaterThan(0);

  // The replacement is a different, freshly initialized process.
  await waitFor(() => p.processes!().ready === 1 || p.processes!().lastError, 90_000, 'the replacement warm Qwen process');
  expect(p.processes!().lastError).toBeUndefined();
  const replacement = qwenChildren().filter((pid) => pid !== run.pid);
  expect(replacement).toHaveLength(1);
  pids.push(...replacement);
  await run.dispose();
  expect(processGone(run.pid)).toBe(true);
  await p.close!();
  expect(p.processes!()).toMatchObject({ ready: 0, warming: 0, inUse: 0 });
  expect(processGone(replacement[0]!)).toBe(true);
});
