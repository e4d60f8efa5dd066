/**
 * Continuable mode of the exported tool and the control tools against a real daemon process,
 * driven by a scripted parent model loop: the child's id comes back at once, settlement notices
 * reach the parent as messages, a later turn keeps the first in context, list_agents shows the
 * child idle or running, interrupt_agent stops a running turn, and another client (another owner
 * key) is refused. The children answer from the scripted model.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { ParentInput, RemoteSubagentService } from '../client/index.js';
import { createChildControlTools, createSubagentTool, type SubagentToolHandle, type ToolDefinition } from '../tool/index.js';
import { startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { runParentLoop } from './support/tool-loop.js';

const KEY_A = 'tool-e2e-owner-key-a-0123456789';
const KEY_B = 'tool-e2e-owner-key-b-0123456789';
let daemon: DaemonProcess;
let scripts: string;
const clients = new ClientPool();
const handles: Array<SubagentToolHandle<ParentInput>> = [];

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
  scripts = mkdtempSync(join(tmpdir(), 'tool-continuable-'));
});
afterAll(async () => {
  await daemon?.stop();
  rmSync(scripts, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.dispose()));
  await clients.closeAll();
});

function scripted(name: string, steps: unknown[]): string {
  const path = join(scripts, `${name}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

/** A parent harness: the tool in continuable mode, the control tools, and the messages it got. */
async function harness(ownerKey: string, model: string) {
  const service: RemoteSubagentService = await clients.connect(daemon.socket, { ownerKey });
  const handle = createSubagentTool<ParentInput>(service, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { model } });
  handles.push(handle);
  const inbox: string[] = [];
  handle.onChildSettled((_notice, message) => inbox.push(message.map((b) => (b.type === 'text' ? b.text : '')).join('')));
  const control = createChildControlTools<ParentInput>(service.children!);
  const tools = (): ToolDefinition<ParentInput>[] => [handle.current()!, ...control.all];
  return { service, handle, inbox, tools };
}

it('a scripted parent starts a continuable child, gets its notice, gives it a later turn, lists and interrupts it', async () => {
  const model = scripted('memory', [{ text: 'noted: kiwi' }, { text: 'the word was kiwi' }, { text: 'still thinking', delayMs: 30_000 }]);
  const parent: ParentInput = { sessionId: 'tool-parent-a', cwd: daemon.dir };
  const a = await harness(KEY_A, model);
  expect(a.handle.refusal()).toBeUndefined();

  const [started] = await runParentLoop(a.tools, [[{ name: 'subagent', input: { description: 'memory', prompt: 'remember the word kiwi' } }]], { parent });
  expect(started!.result.isError).toBe(false);
  const childId = /started subagent (\S+)/.exec(started!.text)![1]!;
  await waitFor(() => a.inbox.length === 1, 10_000, () => 'the first settlement notice');
  expect(a.inbox[0]).toBe('memory finished. Its closing message:\nnoted: kiwi');

  const second = await runParentLoop(
    a.tools,
    [
      [{ name: 'list_agents', input: {} }],
      [{ name: 'send_message', input: { subagent_id: childId, message: 'which word?' } }],
    ],
    { parent },
  );
  expect(second[0]!.text).toBe(`${childId} idle "memory"`);
  expect(second[1]!.result.isError).toBe(false);
  await waitFor(() => a.inbox.length === 2, 10_000, () => 'the second settlement notice');
  // The scripted model answers turn 2 with its second entry: the child kept its session.
  expect(a.inbox[1]).toBe('memory finished. Its closing message:\nthe word was kiwi');

  // A third, slow turn: running, then interrupted by the parent.
  const third = await runParentLoop(a.tools, [[{ name: 'send_message', input: { subagent_id: childId, message: 'think hard' } }]], { parent });
  expect(third[0]!.result.isError).toBe(false);
  const [running] = await runParentLoop(a.tools, [[{ name: 'list_agents', input: { scope: 'children' } }]], { parent });
  expect(running!.text).toBe(`${childId} running "memory"`);
  const [stopped] = await runParentLoop(a.tools, [[{ name: 'interrupt_agent', input: { agent_id: childId } }]], { parent });
  expect(stopped!.result.isError).toBe(false);
  await waitFor(() => a.inbox.length === 3, 10_000, () => 'the interrupted turn to settle');
  expect(a.inbox[2]!.startsWith('memory was stopped before it finished.')).toBe(true);
});

it("two clients cannot message or interrupt each other's children through the tools", async () => {
  const model = scripted('owned', [{ text: 'working', delayMs: 30_000 }]);
  const parent: ParentInput = { sessionId: 'tool-shared-parent', cwd: daemon.dir };
  const a = await harness(KEY_A, model);
  const b = await harness(KEY_B, model);
  const [started] = await runParentLoop(a.tools, [[{ name: 'subagent', input: { description: 'owned', prompt: 'work' } }]], { parent });
  const childId = /started subagent (\S+)/.exec(started!.text)![1]!;
  const attempts = await runParentLoop(
    b.tools,
    [[
      { name: 'send_message', input: { subagent_id: childId, message: 'hijack' } },
      { name: 'interrupt_agent', input: { agent_id: childId } },
      { name: 'list_agents', input: {} },
    ]],
    { parent },
  );
  expect(attempts.map((entry) => entry.result.isError)).toEqual([true, true, false]);
  expect(attempts[0]!.text).toContain('(NOT_OWNER)');
  expect(attempts[1]!.text).toContain('(NOT_OWNER)');
  expect(attempts[2]!.text).toBe('no subagents');
  const [mine] = await runParentLoop(a.tools, [[{ name: 'interrupt_agent', input: { agent_id: childId } }]], { parent });
  expect(mine!.result.isError).toBe(false);
});
