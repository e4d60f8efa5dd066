/**
 * `subagentd mcp --background-mode continuable` driven by the MCP SDK's own `Client` over stdio:
 * the control tools listed with tool/'s wording, a durable child started through `subagent`,
 * given a second turn with `send_message`, watched with `list_agents` (which also carries the
 * settlement notices), stopped with `interrupt_agent`, kept across a daemon restart, and bad
 * input naming the field.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createChildControlTools } from '../tool/index.js';
import type { ContinuableChildren } from '../protocol/index.js';
import { CliSandbox, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';
import { openMcpFace, type McpFace } from './support/face-harness.js';

let box: CliSandbox;
const faces: McpFace[] = [];

beforeAll(() => {
  box = new CliSandbox('subagentd-mcp-children-');
});
afterAll(async () => {
  for (const f of faces) await f.close().catch(() => undefined);
  await box.cleanup();
});

const textOf = (result: CallToolResult): string => result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

/** tool/'s own control tools, for their wording (never executed). */
const wording = createChildControlTools({} as ContinuableChildren);

async function continuableFace(name: string, steps: unknown[]): Promise<McpFace> {
  const face = await openMcpFace(box, ['--background-mode', 'continuable', '--model', `scripted:${box.file(`${name}.json`, { steps })}`]);
  faces.push(face);
  return face;
}

it('starts, messages, lists and interrupts a continuable child through the MCP tools', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await continuableFace('turns', [{ text: 'I will remember kiwi.' }, { text: 'The word was kiwi.' }, { text: 'never said', delayMs: 60_000 }]);
  // Everything the model reads, in order: a notice rides on whichever result comes next.
  const seen: string[] = [];
  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> => {
    const result = (await mcp.client.callTool({ name, arguments: args })) as CallToolResult;
    seen.push(textOf(result));
    return result;
  };
  const everything = (): string => seen.join('\n');

  const { tools } = await mcp.client.listTools();
  expect(tools.map((t) => t.name)).toEqual(['subagent', 'send_message', 'interrupt_agent', 'list_agents']);
  for (const tool of wording.all) {
    const listed = tools.find((t) => t.name === tool.name)!;
    expect(listed.description).toBe(tool.description);
    expect(listed.inputSchema).toEqual(tool.inputSchema);
  }
  expect(tools[0]!.description).toContain('By default the subagent runs in the background: the call returns its durable id at once');

  /** Calls list_agents until `check` holds for what the model has read so far. */
  const listUntil = async (check: (text: string) => boolean, what: string): Promise<void> => {
    await waitUntil(
      async () => {
        expect((await call('list_agents', {})).isError).toBeFalsy();
        return check(everything());
      },
      20_000,
      what,
    );
  };
  const notices = (): string[] => seen.flatMap((text) => text.split('\n').filter((line) => line.startsWith('memory ')));

  const started = await call('subagent', { description: 'memory', prompt: 'remember the word kiwi' });
  expect(started.isError).toBeFalsy();
  const childId = /^started subagent (\S+) \(memory\) in the background/.exec(textOf(started))?.[1];
  expect(childId, textOf(started)).toBeDefined();

  await listUntil((text) => text.includes('I will remember kiwi.'), 'the first settlement notice');
  expect(everything()).toContain('memory finished. Its closing message:\nI will remember kiwi.');
  expect(seen.at(-1)).toMatch(new RegExp(`^${childId} idle "memory"`));

  const sent = await call('send_message', { subagent_id: childId, message: 'which word?' });
  expect(textOf(sent)).toMatch(new RegExp(`^message msg_\\S+ delivered to subagent ${childId}; it becomes its next turn$`));
  await listUntil((text) => text.includes('The word was kiwi.'), 'the second settlement notice');
  expect(everything()).toContain('memory finished. Its closing message:\nThe word was kiwi.');
  expect(seen.at(-1)).toMatch(new RegExp(`^${childId} idle "memory"`));

  await call('send_message', { subagent_id: childId, message: 'think about it for a long time' });
  await listUntil(() => seen.at(-1)!.startsWith(`${childId} running`), 'the third turn running');
  const interrupted = await call('interrupt_agent', { agent_id: childId });
  expect(textOf(interrupted)).toMatch(new RegExp(`^interrupted agent ${childId} \\(its current turn was stopped\\)`));
  await listUntil((text) => text.includes('memory was stopped before it finished.'), 'the stopped notice');
  // Each notice delivered once, in order; the stopped turn said nothing.
  expect(notices()).toEqual(['memory finished. Its closing message:', 'memory finished. Its closing message:', expect.stringMatching(/^memory was stopped before it finished\. /)]);
  expect(everything()).not.toContain('never said');
});

it('refuses bad control-tool input with an MCP error naming the field, and offers no job tools', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await continuableFace('fine', [{ text: 'fine' }]);
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['send_message', { message: 'hello' }, 'subagent_id'],
    ['send_message', { subagent_id: 'c1' }, 'message'],
    ['send_message', { subagent_id: 'c1', message: 7 }, 'message'],
    ['interrupt_agent', { agent_id: 3 }, 'agent_id'],
    ['interrupt_agent', { agent_id: 'c1', level: 'now' }, 'level'],
    ['list_agents', { scope: 'everyone' }, 'scope'],
    ['job_output', { job_id: 'subagent-1' }, 'name'],
  ];
  for (const [tool, args, field] of cases) {
    const error = await mcp.client.callTool({ name: tool, arguments: args }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error, `${tool} ${JSON.stringify(args)}`).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toMatch(tool === 'job_output' ? /unknown tool "job_output"/ : new RegExp(`"${field}"`));
  }
  // A well-formed call on a child that does not exist: the daemon's refusal, as the model's error result.
  const unknown = (await mcp.client.callTool({ name: 'send_message', arguments: { subagent_id: 'no-such-child', message: 'hi' } })) as CallToolResult;
  expect(unknown.isError).toBe(true);
  expect(textOf(unknown)).toMatch(/^send_message failed \(NOT_RESUMABLE\)/);
  const listed = (await mcp.client.callTool({ name: 'list_agents', arguments: {} })) as CallToolResult;
  expect(textOf(listed)).toBe('no subagents');
});

it('refuses a bad --background-mode as a usage error, and a face it cannot build exits with the reason', { timeout: HEAVY_TEST_MS }, async () => {
  const bogus = await box.run(['mcp', '--background-mode', 'sometimes'], { timeoutMs: 30_000 });
  expect(bogus.code).toBe(2);
  expect(bogus.stderr).toContain('--background-mode must be one of one-shot, continuable (got "sometimes")');
  // The daemon is up (the tests above started it); the face cannot be built and ends, closing its connection.
  const unknown = await box.run(['mcp', '--background-mode', 'continuable', '--provider', 'nosuch'], { timeoutMs: 30_000 });
  expect(unknown.signal).toBeNull();
  expect(unknown.code).not.toBe(0);
  expect(unknown.stderr).toContain("no provider named 'nosuch'");
});

it('keeps a child started through the face across a daemon restart: the face reconnects and the child takes the next message', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await continuableFace('durable', [{ text: 'I will remember kiwi.' }]);
  const read: string[] = [];
  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> => {
    const result = (await mcp.client.callTool({ name, arguments: args })) as CallToolResult;
    read.push(textOf(result));
    return result;
  };
  const started = await call('subagent', { description: 'keeper', prompt: 'remember the word kiwi' });
  const childId = /^started subagent (\S+) /.exec(textOf(started))![1]!;
  /** How many settlement notices of `keeper` the model has read after one more list_agents. */
  const noticesAfterListing = async (): Promise<number> => {
    await call('list_agents', {});
    return read.join('\n').split('keeper finished.').length - 1;
  };
  await waitUntil(async () => (await noticesAfterListing()) === 1, 20_000, 'the first notice');

  const restart = await box.run(['restart', '--timeout', '5'], { timeoutMs: 60_000 });
  expect(restart.code, restart.stderr).toBe(0);
  // While the face reconnects a call may fail; once back, its child is still listed.
  await waitUntil(async () => textOf(await call('list_agents', {})).startsWith(`${childId} idle "keeper"`), 20_000, 'the child listed after the restart');
  const sent = await call('send_message', { subagent_id: childId, message: 'which word?' });
  expect(sent.isError, textOf(sent)).toBeFalsy();
  await waitUntil(async () => (await noticesAfterListing()) === 2, 20_000, 'the notice of the restored turn');
  expect(read.join('\n')).toContain('keeper finished. Its closing message:\nI will remember kiwi.');
});
