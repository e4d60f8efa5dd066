/**
 * `subagentd acp` spoken to by hand: newline-delimited JSON-RPC written to its stdin and read
 * from its stdout, so the test sees the exact messages and their order. Streamed updates come
 * before the prompt's answer; bad input (a relative cwd too) gets a JSON-RPC error and the face
 * carries on; a cancel for a session that has no turn is harmless; an unknown provider is
 * refused at start.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliSandbox, HEAVY_TEST_MS, waitUntil, type CliProcess } from './support/cli-harness.js';

interface Message {
  jsonrpc: '2.0';
  id?: number;
  method?: string;
  params?: any;
  result?: any;
  error?: { code: number; message: string };
}

let box: CliSandbox;
let face: CliProcess;
const received: Message[] = [];
let nextId = 1;

function send(message: Record<string, unknown>): void {
  face.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
}

async function request(method: string, params: unknown): Promise<Message> {
  const id = nextId++;
  send({ id, method, params });
  let reply: Message | undefined;
  await waitUntil(() => (reply = received.find((m) => m.id === id && m.method === undefined)) !== undefined, 20_000, `the answer to ${method}`);
  return reply as Message;
}

beforeAll(() => {
  box = new CliSandbox('subagentd-acp-raw-');
  const script = box.file('child.json', { steps: [{ text: 'Raw answer.', finish: 'stop' }] });
  face = box.spawn(['acp', '--model', `scripted:${script}`], { timeoutMs: 60_000 });
  let pending = '';
  face.child.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) if (line.trim()) received.push(JSON.parse(line) as Message);
  });
});
afterAll(async () => {
  face.child.stdin.end();
  await face.exited;
  await box.cleanup();
});

it('answers initialize, new and prompt, with the streamed updates written before the answer', { timeout: HEAVY_TEST_MS }, async () => {
  const init = await request('initialize', { protocolVersion: 1, clientCapabilities: {} });
  expect(init.result).toMatchObject({ protocolVersion: 1, agentCapabilities: { loadSession: true }, agentInfo: { name: 'subagentd' }, authMethods: [] });
  const created = await request('session/new', { cwd: box.work, mcpServers: [] });
  const sessionId = created.result.sessionId as string;
  const prompt = await request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hello' }] });
  expect(prompt.result).toEqual({ stopReason: 'end_turn' });
  const answerAt = received.indexOf(prompt);
  const chunks = received
    .slice(0, answerAt)
    .filter((m) => m.method === 'session/update' && m.params.sessionId === sessionId && m.params.update.sessionUpdate === 'agent_message_chunk');
  expect(chunks.map((m) => m.params.update.content.text).join('')).toBe('Raw answer.');
  // Nothing about this session after the answer: the turn is over.
  expect(received.slice(answerAt + 1).filter((m) => m.params?.sessionId === sessionId)).toEqual([]);
});

it('refuses an unknown --provider at start, exiting 1 with the providers there are', { timeout: HEAVY_TEST_MS }, async () => {
  const refused = await box.run(['acp', '--provider', 'nope']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("no provider named 'nope' (available: spawn, fork");
  expect(refused.stdout).toBe('');
});

it('answers bad input with JSON-RPC errors and keeps serving', { timeout: HEAVY_TEST_MS }, async () => {
  const unknown = await request('session/prompt', { sessionId: 'acp_00000000-0000-0000-0000-000000000000', prompt: [{ type: 'text', text: 'x' }] });
  expect(unknown.error?.code).toBe(-32002); // resource not found
  const malformed = await request('session/prompt', { sessionId: 42 });
  expect(malformed.error?.code).toBe(-32602);
  const missing = await request('session/load', { sessionId: '../../etc/passwd', cwd: box.work, mcpServers: [] });
  expect(missing.error?.code).toBe(-32002);
  const noSuchMethod = await request('session/teleport', {});
  expect(noSuchMethod.error?.code).toBe(-32601);
  send({ method: 'session/cancel', params: { sessionId: 'acp_00000000-0000-0000-0000-000000000000' } });

  // A line over limits.faceLineBytes (4 MiB) is answered for its own id, and not buffered whole.
  const bigId = nextId++;
  face.child.stdin.write(`{"jsonrpc":"2.0","id":${bigId},"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"text","text":"${'y'.repeat(5 * 1024 * 1024)}"}]}}\n`);
  let big: Message | undefined;
  await waitUntil(() => (big = received.find((m) => m.id === bigId)) !== undefined, 30_000, 'the answer to the oversize line');
  expect(big?.error?.code).toBe(-32600);
  expect(big?.error?.message).toContain('limits.faceLineBytes');

  const relative = await request('session/new', { cwd: 'work/project', mcpServers: [] });
  expect(relative.error?.code).toBe(-32602);
  expect(relative.error?.message).toContain("cwd must be an absolute path, not 'work/project'");

  const created = await request('session/new', { cwd: box.work, mcpServers: [] });
  const again = await request('session/prompt', { sessionId: created.result.sessionId, prompt: [{ type: 'text', text: 'still there?' }] });
  expect(again.result).toEqual({ stopReason: 'end_turn' });
});
