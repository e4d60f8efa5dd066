/**
 * Product level: the published `dsh` CLI (`--profile headless`) with the shipped `--patch` overlay
 * (examples/harness/subagentd.patch.yml) that swaps its in-process subagent providers for `subagentd/harness`, against a fake
 * OpenAI-compatible server speaking DeepSeek's wire format. The parent model delegates once; the
 * child runs in a real daemon; dsh prints the final answer, which repeats what the child said.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { textResponse, toolCallResponse } from './support/chat-completions-server.js';
import { REPO, type DaemonProcess } from './support/daemon-process.js';
import { startE2eDaemon } from './support/e2e-daemon.js';
import { ModelServer, contentText } from './support/e2e-model-server.js';
import { ensureDshProduct, makeDshHome } from './support/harness-packages.js';

let launcher: string;
let server: ModelServer;
let daemon: DaemonProcess;
let home: string;
beforeAll(async () => {
  launcher = ensureDshProduct();
  server = await ModelServer.start();
  // The children's model is the daemon's default here: the example overlay names none.
  daemon = await startE2eDaemon({ detachGraceMs: 0, model: { default: `scripted:${join(REPO, 'examples', 'hello.json')}` } });
  home = mkdtempSync(join(tmpdir(), 'subagentd-dsh-home-'));
}, 400_000);
afterAll(async () => {
  await daemon?.stop();
  await server?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

function runDsh(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // dsh spills to a temp dir of its own: inside the test's home, it goes with it.
    const tmp = join(home, 'tmp');
    mkdirSync(tmp, { recursive: true });
    const child = spawn(process.execPath, [launcher, ...args], { cwd: REPO, env: { PATH: process.env['PATH'] ?? '', HOME: home, TMPDIR: tmp, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

it('dsh --profile headless delegates through subagentd/harness and prints the answer', async () => {
  const patch = join(REPO, 'examples', 'harness', 'subagentd.patch.yml'); // the shipped example, as is
  // The fake parent model: the conversation request with the subagent tool delegates once, then
  // answers with what its tool returned; any auxiliary request (a session title) gets a short text.
  const parentModel = (body: { tools?: Array<{ function: { name: string } }>; messages: Array<{ role: string; content?: unknown }> }) => {
    const tool = body.messages.filter((message) => message.role === 'tool').at(-1);
    if (tool !== undefined) return textResponse([`The subagent said: ${contentText(tool as never)}`]);
    if (body.tools?.some((t) => t.function.name === 'subagent')) {
      return toolCallResponse([{ id: 'call_dsh_1', name: 'subagent', arguments: JSON.stringify({ description: 'summarise repo', prompt: 'Summarise this repository' }) }]);
    }
    return textResponse(['Repository summary']);
  };
  server.enqueue(...Array.from({ length: 6 }, () => parentModel));
  const result = await runDsh(['--profile', 'headless', '--patch', patch, 'Summarise this repository using a subagent'], {
    DSH_HOME: makeDshHome(home),
    SUBAGENTD_SOCKET: daemon.socket,
    DEEPSEEK_BASE_URL: server.baseUrl,
    DEEPSEEK_API_KEY: 'sk-fake-dsh',
  });
  expect(result.code, result.stderr.slice(-3000)).toBe(0);
  expect(result.stdout).toContain('The subagent said: This repository is subagentd');
  // The child ran in the daemon, not in dsh: its session log is in the daemon's state dir.
  const client = await import('../client/index.js').then(({ connect }) => connect({ socket: daemon.socket }));
  try {
    expect((await client.ops.runs()).some((run) => run.provider === 'spawn' && run.stopReason === 'completed')).toBe(true);
  } finally {
    await client.close();
  }
});
