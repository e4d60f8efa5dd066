/**
 * Continuable mode and the child-control tools, against an in-memory double of the
 * ContinuableChildren contract (test/support/tool-fakes.ts) until the daemon's implementation is
 * on main: capability by presence at mount, background by default with a durable id, the
 * authority rules surfacing as error results, the listing, and the settlement notice.
 */
import { describe, expect, it } from 'vitest';
import { createChildControlTools, createSubagentTool, type ToolDefinition } from '../tool/index.js';
import { FakeChildren, FakeService, provider, text } from './support/tool-fakes.js';
import { callOnce, runParentLoop } from './support/tool-loop.js';
import { waitFor } from './support/scripted-fixtures.js';

function setup() {
  const service = new FakeService();
  const children = new FakeChildren();
  service.children = children;
  service.add(provider('p'));
  const handle = createSubagentTool(service, { provider: 'p', backgroundMode: 'continuable' });
  const control = createChildControlTools(children);
  const tools = (): ToolDefinition<string>[] => [handle.current()!, ...control.all];
  return { service, children, handle, control, tools };
}

describe('mount', () => {
  it('is refused when the service has no children, or the provider cannot resume a child', () => {
    const bare = new FakeService();
    bare.add(provider('p'));
    const noChildren = createSubagentTool(bare, { provider: 'p', backgroundMode: 'continuable' });
    expect(noChildren.current()).toBeUndefined();
    expect(noChildren.refusal()?.message).toContain('can continue children');
    for (const runtime of [{ sendMessage: true, resume: false }, undefined]) {
      const service = new FakeService();
      service.children = new FakeChildren();
      service.add(runtime ? provider('p', { runtime }) : { ...provider('p'), runtime: undefined as never });
      const handle = createSubagentTool(service, { provider: 'p', backgroundMode: 'continuable' });
      expect(handle.current()).toBeUndefined();
      expect(handle.refusal()?.details.field).toBe('/backgroundMode');
    }
  });

  it('is mounted when both can, with wording that says background by default, durable id, send_message', () => {
    const { handle } = setup();
    const tool = handle.current()!;
    expect(tool.description).toContain('runs in the background');
    expect(tool.description).toContain('durable id');
    expect(tool.description).toContain('send_message');
  });
});

describe('calls', () => {
  it('run in the background by default: the child id comes back and the child outlives the call', async () => {
    const { children, handle } = setup();
    const call = new AbortController();
    const { result, text: out } = await callOnce(handle.current()!, { description: 'audit deps', prompt: 'audit the dependencies' }, { parent: 'root', signal: call.signal });
    call.abort();
    expect(result.isError).toBe(false);
    expect(out).toContain('started subagent child-1 (audit deps)');
    const [start] = children.starts;
    expect(start!.provider).toBe('p');
    expect(start!.request).toMatchObject({ label: 'audit deps', prompt: text('audit the dependencies'), parent: 'root', maxDepth: 3 });
    expect(start!.request.signal.aborted).toBe(false);
  });

  it('run_in_background: false runs a one-shot child in the foreground instead', async () => {
    const { service, children, handle } = setup();
    const call = callOnce(handle.current()!, { description: 'quick', prompt: 'q', run_in_background: false }, { parent: 'root' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({ output: text('quick answer'), stopReason: 'completed' });
    expect((await call).text).toBe('quick answer');
    expect(children.starts).toEqual([]);
  });

  it('a scripted parent starts a child, messages it, lists and interrupts it', async () => {
    const { children, tools } = setup();
    const transcript = await runParentLoop(
      tools,
      [
        [{ name: 'subagent', input: { description: 'watch logs', prompt: 'watch the logs' } }],
        [{ name: 'send_message', input: { subagent_id: 'child-1', message: 'also check disk usage' } }],
        [{ name: 'list_agents', input: {} }],
        [{ name: 'interrupt_agent', input: { agent_id: 'child-1' } }],
        [{ name: 'list_agents', input: { scope: 'children' } }],
      ],
      { parent: 'root' },
    );
    expect(transcript.map((entry) => entry.result.isError)).toEqual([false, false, false, false, false]);
    expect(transcript[1]!.text).toBe('message msg-2 delivered to subagent child-1; it becomes its next turn');
    expect(children.children.get('child-1')!.inbox).toEqual(['watch the logs', 'also check disk usage']);
    expect(transcript[2]!.text).toBe('child-1 running "watch logs"');
    expect(transcript[3]!.text).toBe('interrupted agent child-1 (its current turn was stopped)');
    expect(children.children.get('child-1')!.interrupted).toEqual(['now']);
    expect(transcript[4]!.text).toBe('child-1 idle "watch logs"');
  });
});

describe('control tools: authority and listing', () => {
  async function family() {
    const ctx = setup();
    // root → child-1 → child-2 (grandchild); other → child-3
    await callOnce(ctx.handle.current()!, { description: 'one', prompt: 'x' }, { parent: 'root' });
    await callOnce(ctx.handle.current()!, { description: 'two', prompt: 'x' }, { parent: 'child-1' });
    await callOnce(ctx.handle.current()!, { description: 'three', prompt: 'x' }, { parent: 'other' });
    return ctx;
  }

  it('only the direct parent sends a message; anyone else gets NOT_OWNER as an error result', async () => {
    const { control } = await family();
    const grandparent = await callOnce(control.sendMessage, { subagent_id: 'child-2', message: 'hi' }, { parent: 'root' });
    const stranger = await callOnce(control.sendMessage, { subagent_id: 'child-1', message: 'hi' }, { parent: 'other' });
    const parentCall = await callOnce(control.sendMessage, { subagent_id: 'child-2', message: 'hi' }, { parent: 'child-1' });
    expect([grandparent.result.isError, stranger.result.isError, parentCall.result.isError]).toEqual([true, true, false]);
    expect(grandparent.text).toMatch(/^send_message failed \(NOT_OWNER\): /);
  });

  it('the parent or an ancestor may interrupt; a sibling or stranger may not; an absent target is a no-op', async () => {
    const { control, children } = await family();
    const ancestor = await callOnce(control.interruptAgent, { agent_id: 'child-2' }, { parent: 'root' });
    const stranger = await callOnce(control.interruptAgent, { agent_id: 'child-2' }, { parent: 'other' });
    const sibling = await callOnce(control.interruptAgent, { agent_id: 'child-3' }, { parent: 'child-1' });
    const absent = await callOnce(control.interruptAgent, { agent_id: 'child-99' }, { parent: 'root' });
    expect([ancestor, stranger, sibling, absent].map((entry) => entry.result.isError)).toEqual([false, true, true, false]);
    expect(stranger.text).toContain('(NOT_OWNER)');
    expect(children.children.get('child-2')!.interrupted).toEqual(['now']);
    expect(children.children.get('child-3')!.interrupted).toEqual([]);
  });

  it('list_agents: children by default, descendants with parent and depth, unreadable entries reported', async () => {
    const { control, children } = await family();
    children.unreadable = ['child-7: its record is corrupt'];
    const kids = await callOnce(control.listAgents, {}, { parent: 'root' });
    const all = await callOnce(control.listAgents, { scope: 'descendants' }, { parent: 'root' });
    expect(kids.text).toBe('child-1 running "one" has-children\nunreadable entry: child-7: its record is corrupt');
    expect(all.text).toBe(
      'child-1 running "one" parent=root has-children\n  child-2 running "two" parent=child-1\nunreadable entry: child-7: its record is corrupt',
    );
    const none = await callOnce(control.listAgents, {}, { parent: 'nobody' });
    children.unreadable = [];
    expect(none.text.split('\n')[0]).toBe('no subagents');
    const bad = await callOnce(control.listAgents, { scope: 'everyone' }, { parent: 'root' });
    expect(bad.result.isError).toBe(true);
  });

  it('every control tool requires a calling agent and checks its input', async () => {
    const { control } = setup();
    for (const tool of control.all) {
      const orphan = await callOnce(tool, { subagent_id: 'c', message: 'm', agent_id: 'c' }, {});
      expect(orphan.text).toContain('requires a calling agent');
    }
    expect((await callOnce(control.sendMessage, { subagent_id: 'c' }, { parent: 'root' })).text).toBe('send_message needs message, a non-empty string');
    expect((await callOnce(control.interruptAgent, {}, { parent: 'root' })).text).toBe('interrupt_agent needs agent_id, a non-empty string');
  });

  it('the wording says what each does', () => {
    const { control } = setup();
    expect(control.all.map((tool) => tool.name)).toEqual(['send_message', 'interrupt_agent', 'list_agents']);
    expect(control.sendMessage.description).toMatch(/next turn/);
    expect(control.interruptAgent.description).toMatch(/Stop the current turn/);
    expect(control.listAgents.description).toMatch(/running or idle/);
  });
});

describe('settlement notice', () => {
  it('reaches the harness with a message for the parent', async () => {
    const { children, handle } = setup();
    const got: string[] = [];
    handle.onChildSettled((notice, message) => got.push(`${notice.childId}: ${message.map((b) => (b.type === 'text' ? b.text : '')).join('')}`));
    await callOnce(handle.current()!, { description: 'one', prompt: 'x' }, { parent: 'root' });
    const notice = { childId: 'child-1', label: 'one', stopReason: 'completed', text: 'one finished. Its closing message:\nAll green.' };
    children.settle(notice);
    // The service's wording reaches the parent unchanged.
    expect(got).toEqual(['child-1: one finished. Its closing message:\nAll green.']);
    await handle.dispose();
    children.settle(notice);
    expect(got).toHaveLength(1);
  });
});
