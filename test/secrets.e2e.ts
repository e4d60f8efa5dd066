/**
 * Children cannot read the daemon's secrets: the daemon re-executes itself without its API keys
 * in the environment (daemon/ops/secrets.ts), so `/proc/<daemon pid>/environ` — read here by the test
 * (as any same-uid process, e.g. an ACP agent, could) and by a child's shell tool — holds none,
 * while the model still gets its key.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chunk, textResponse, type ScriptedResponse } from './support/chat-completions-server.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { contentText, ModelServer, type WireMessage } from './support/e2e-model-server.js';

const KEYS = { TEST_KEY: 'sk-configured-key-4711', DEEPSEEK_API_KEY: 'sk-deepseek-key-4712', OPENAI_API_KEY: 'sk-openai-key-4713' };
let server: ModelServer;
let daemon: DaemonProcess;
let workspace: string;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  server = await ModelServer.start();
  daemon = await startE2eDaemon(
    { model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', maxRetries: 0 }, tools: { shell: true } },
    { ...KEYS, NOT_A_SECRET: 'kept' },
  );
  workspace = mkdtempSync(join(tmpdir(), 'subagentd-secrets-ws-'));
});

afterAll(async () => {
  await runs.disposeAll();
  await clients.closeAll();
  await daemon?.stop();
  await server?.close();
  if (workspace) rmSync(workspace, { recursive: true, force: true });
});

const shellCall = (command: string): ScriptedResponse => ({
  type: 'stream',
  steps: [
    { data: chunk({ role: 'assistant', content: '' }) },
    { data: chunk({ tool_calls: [{ index: 0, id: 'call_env', type: 'function', function: { name: 'run_shell', arguments: JSON.stringify({ command }) } }] }) },
    { data: chunk({}, { finish_reason: 'tool_calls' }) },
    { done: true },
  ],
});

it("the daemon's own environment holds no key, and the handover file is gone", () => {
  const environ = readFileSync(`/proc/${daemon.proc.pid}/environ`, 'utf8');
  for (const key of Object.values(KEYS)) expect(environ).not.toContain(key);
  expect(environ).toContain('NOT_A_SECRET=kept'); // only the secrets were taken out
  expect(readdirSync(daemon.stateDir).filter((name) => name.startsWith('secrets-'))).toEqual([]);
});

it("a child's shell tool reading /proc/$PPID/environ finds no key, while the model got its key", async () => {
  await server.beginTest();
  // Both ways to name the daemon: $PPID (the shell's parent, when run_shell is not sandboxed in a
  // pid namespace) and its pid outright. Whatever the shell can see, it must find no key.
  const pid = daemon.proc.pid!;
  server.enqueue(shellCall(`echo ppid=$PPID; for p in $PPID ${pid}; do tr '\\0' '\\n' < /proc/$p/environ; done 2>&1`), textResponse(['done']));
  const service = await clients.connect(daemon.socket);
  const run = runs.track(
    await service.start('spawn', {
      prompt: [{ type: 'text', text: 'look around' }],
      parent: { sessionId: 'secrets', cwd: workspace },
      signal: new AbortController().signal,
    }),
  );
  expect((await run.result).stopReason).toBe('completed');
  expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${KEYS.TEST_KEY}`);
  const toolOutput = contentText((server.messages(1) as WireMessage[]).find((m) => m.role === 'tool'));
  expect(toolOutput).toContain('ppid='); // the command ran
  // Unsandboxed, it read the daemon's environ; sandboxed, the daemon is invisible. No key either way.
  if (toolOutput.includes(`ppid=${pid}`)) expect(toolOutput).toContain('NOT_A_SECRET=kept');
  for (const key of Object.values(KEYS)) expect(toolOutput).not.toContain(key);
});
