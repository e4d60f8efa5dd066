/**
 * A real MCP host delegates through `subagentd mcp`: Qwen Code 0.24.4 (from the registry, cached
 * under $TMPDIR) in `-p --output-format json` mode, its model a local chat-completions server
 * speaking the real wire format. Its model asks for `mcp__subagentd__subagent` once; the face
 * runs a pooled child (a scripted model) and Qwen's transcript carries the child's answer.
 * A package that cannot be installed fails the test: it never skips.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chunk, startChatCompletionsServer, textResponse, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { CliSandbox, cleanEnv, MAIN } from './support/cli-harness.js';
import { installCached, writeQwenSettings, type CachedPackage } from './support/real-agents.js';

const TOOL = 'mcp__subagentd__subagent';
const CHILD_ANSWER = 'The sandbox holds one README file.';

let box: CliSandbox;
let model: ChatCompletionsServer;
let qwen: CachedPackage;

const toolCall = (args: Record<string, unknown>): ScriptedResponse => ({
  type: 'stream',
  steps: [
    { data: chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_delegate', type: 'function', function: { name: TOOL, arguments: JSON.stringify(args) } }] }) },
    { data: chunk({}, { finish_reason: 'tool_calls' }) },
    { done: true },
  ],
});

/** Qwen's model: delegate once when the tool is offered and not yet answered, then report what came back. */
function answer(body: { messages?: Array<{ role: string; content?: unknown }>; tools?: Array<{ function?: { name?: string } }> }): ScriptedResponse {
  const messages = body.messages ?? [];
  const toolResult = messages.find((m) => m.role === 'tool');
  if (toolResult) return textResponse([`The subagent said: ${JSON.stringify(toolResult.content)}`]);
  if (body.tools?.some((t) => t.function?.name === TOOL)) return toolCall({ description: 'Inspect the sandbox', prompt: 'List the working directory and say what is there.' });
  return textResponse(['ok']);
}

beforeAll(async () => {
  box = new CliSandbox('subagentd-qwen-');
  model = await startChatCompletionsServer({ fallback: answer });
  qwen = await installCached('@qwen-code/qwen-code', '0.24.4');
}, 300_000);
afterAll(async () => {
  await model?.close();
  await box?.cleanup();
});

it('Qwen Code delegates once through mcp__subagentd__subagent and reads the child answer', { timeout: 180_000 }, async () => {
  const script = box.file('child.json', {
    steps: [
      { text: 'Looking.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
      { text: CHILD_ANSWER, finish: 'stop' },
    ],
  });
  const home = join(box.root, 'home');
  writeQwenSettings(home, {
    mcpServers: {
      subagentd: {
        command: process.execPath,
        args: [MAIN, 'mcp', ...box.flags, '--model', `scripted:${script}`],
        cwd: box.work,
        trust: true,
        alwaysLoadTools: true,
        timeout: 120_000,
      },
    },
  });
  const child = spawn(process.execPath, [join(qwen.packageDir, 'cli-entry.js'), '-p', 'Find out what is in the working directory, using a subagent.', '--output-format', 'json'], {
    cwd: box.work,
    // TMPDIR in the sandbox: Qwen Code's peer-socket dir (qwen-socks-<nonce>) goes with it.
    env: cleanEnv({ HOME: home, TMPDIR: box.root, OPENAI_API_KEY: 'sk-fake', OPENAI_BASE_URL: model.baseUrl, OPENAI_MODEL: 'fake-model', CI: 'true', NO_COLOR: '1' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  clearTimeout(killer);
  expect(code, `qwen exited ${code}\nstdout: ${stdout.slice(-3000)}\nstderr: ${stderr.slice(-3000)}`).toBe(0);

  const transcript = JSON.parse(stdout) as Array<Record<string, any>>;
  const text = JSON.stringify(transcript);
  expect(text).toContain(TOOL);
  // The tool result Qwen's model saw is the pooled child's answer.
  const toolMessages = model.requests.flatMap((r) => (r.body?.messages ?? []).filter((m: { role: string }) => m.role === 'tool'));
  expect(JSON.stringify(toolMessages)).toContain(CHILD_ANSWER);
  expect(text).toContain(CHILD_ANSWER);
});
