/**
 * Continuable children across processes: a real daemon process, real sockets, the client's
 * `children` member, and the local chat-completions server recording what the model saw.
 */
import { afterEach, expect, it } from 'vitest';
import type { ChildSettledNotice, RemoteChildren, RemoteSubagentService } from '../client/index.js';
import { restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { rejection } from './support/assertions.js';
import { createChildControlTools, createSubagentTool } from '../tool/index.js';
import { startChatCompletionsServer, textResponse, chunk, type ChatCompletionsServer } from './support/chat-completions-server.js';

const KEY_A = 'owner-key-of-client-a-0123456789';
const KEY_B = 'owner-key-of-client-b-0123456789';
const text = (value: string) => [{ type: 'text' as const, text: value }];
const daemons: DaemonProcess[] = [];
const servers: ChatCompletionsServer[] = [];
const clients = new ClientPool();
afterEach(async () => {
  await clients.closeAll();
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(): Promise<{ daemon: DaemonProcess; server: ChatCompletionsServer }> {
  const server = await startChatCompletionsServer();
  servers.push(server);
  const model = { baseUrl: server.baseUrl, apiKeyEnv: 'CHILDREN_TEST_KEY', default: 'test-model', maxRetries: 0 };
  const daemon = await startDaemon({ model }, [], { env: { CHILDREN_TEST_KEY: 'k' } });
  daemons.push(daemon);
  return { daemon, server };
}

function childrenOf(service: RemoteSubagentService): RemoteChildren {
  expect(service.children).toBeDefined();
  return service.children!;
}

/** Notices as they arrive, and a way to wait for the n-th one. */
function collect(children: RemoteChildren): { notices: ChildSettledNotice[]; nth(n: number): Promise<ChildSettledNotice> } {
  const notices: ChildSettledNotice[] = [];
  const waiting: Array<() => void> = [];
  children.onSettled((notice) => {
    notices.push(notice);
    for (const wake of waiting.splice(0)) wake();
  });
  const nth = async (n: number): Promise<ChildSettledNotice> => {
    const deadline = Date.now() + 10_000;
    while (notices.length < n) {
      if (Date.now() > deadline) throw new Error(`no settlement notice #${n} (have ${notices.length})`);
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        setTimeout(resolve, 200);
      });
    }
    return notices[n - 1]!;
  };
  return { notices, nth };
}

/** A response that keeps its turn running until `release` text arrives after `waitMs`. */
const slowText = (value: string, waitMs: number) => ({
  type: 'stream' as const,
  steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { wait: waitMs }, { data: chunk({ content: value }, { finish_reason: 'stop' }) }, { done: true as const }],
});

const transcript = (server: ChatCompletionsServer, i: number): string[] =>
  (server.requests[i]!.body as { messages: Array<{ role: string; content: unknown }> }).messages
    .slice(1)
    .map((m) => `${m.role}:${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`);

it('a continuable child survives a daemon restart between two messages and answers the second with its first turn in context', async () => {
  const { daemon, server } = await setup();
  const parent = { sessionId: 'harness-1', cwd: daemon.dir };
  server.enqueue(textResponse(['the first answer']));
  const first = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const seen = collect(first);
  const { childId, messageId } = await first.start('spawn', { prompt: text('remember the word kiwi'), parent, label: 'memory', signal: new AbortController().signal });
  expect(messageId).toMatch(/^msg_/);
  const settled = await seen.nth(1);
  expect(settled).toMatchObject({ childId, parentId: 'harness-1', label: 'memory', stopReason: 'completed' });
  expect(settled.text).toBe('memory finished. Its closing message:\nthe first answer');
  expect(await first.list(parent)).toEqual({ entries: [{ id: childId, status: 'idle', label: 'memory', hasChildren: false }], diagnostics: [] });

  // An orderly stop, then a new daemon process on the same state dir.
  await clients.closeAll();
  const exited = new Promise((resolve) => daemon.proc.once('exit', resolve));
  daemon.proc.kill('SIGTERM');
  await exited;
  const next = await restartDaemon(daemon, { env: { CHILDREN_TEST_KEY: 'k' } });
  daemons.splice(0, 1, next);

  server.enqueue(textResponse(['the word was kiwi']));
  const again = childrenOf(await clients.connect(next.socket, { ownerKey: KEY_A }));
  const seenAgain = collect(again);
  expect((await again.list(parent)).entries).toEqual([{ id: childId, status: 'idle', label: 'memory', hasChildren: false }]);
  await again.sendMessage(childId, text('which word?'), parent);
  expect((await seenAgain.nth(1)).text).toBe('memory finished. Its closing message:\nthe word was kiwi');
  expect(transcript(server, 1)).toEqual(['user:remember the word kiwi', 'assistant:the first answer', 'user:which word?']);
  // The restored child has the tools it started with, its report tool included.
  const tools = (body: any): string[] => body.tools.map((t: { function: { name: string } }) => t.function.name).sort();
  expect(tools(server.requests[1]!.body)).toEqual(tools(server.requests[0]!.body));
  expect(tools(server.requests[1]!.body)).toContain('report');
});

it('two clients cannot message, interrupt or list each other\'s children; only the direct parent sends', async () => {
  const { daemon, server } = await setup();
  const parent = { sessionId: 'shared-name', cwd: daemon.dir };
  // The first turn outlasts the checks below (they need it running).
  server.enqueue(slowText('done', 5000));
  const a = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const b = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_B }));
  const { childId } = await a.start('spawn', { prompt: text('work'), parent, signal: new AbortController().signal });

  // The other client, even naming the same parent session: refused, and it sees nothing.
  expect(await rejection(b.sendMessage(childId, text('hijack'), parent))).toMatchObject({ code: 'NOT_OWNER' });
  expect(await rejection(b.interrupt(childId, parent))).toMatchObject({ code: 'NOT_OWNER' });
  expect(await b.list(parent)).toEqual({ entries: [], diagnostics: [] });
  // The owner, but not as the direct parent: an unrelated session, or the child itself.
  expect(await rejection(a.sendMessage(childId, text('x'), 'someone-else'))).toMatchObject({ code: 'NOT_OWNER' });
  expect(await rejection(a.sendMessage(childId, text('x'), childId))).toMatchObject({ code: 'NOT_OWNER' });
  expect(await rejection(a.interrupt(childId, childId))).toMatchObject({ code: 'NOT_OWNER' });
  // Unknown children: a send cannot resume anything, an interrupt is a no-op.
  expect(await rejection(a.sendMessage('no-such-child', text('x'), parent))).toMatchObject({ code: 'NOT_RESUMABLE' });
  await expect(a.interrupt('no-such-child', parent)).resolves.toBeUndefined();
  expect((await a.list(parent)).entries).toMatchObject([{ id: childId, status: 'running' }]);
});

it('a continuable start sends what a one-shot start sends, and refuses a -0 depth at the client as a one-shot start does', async () => {
  const { daemon } = await setup();
  const parent = { sessionId: 'harness-depth', cwd: daemon.dir };
  const children = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const error = await rejection(children.start('spawn', { prompt: text('x'), parent, maxDepth: -0, signal: new AbortController().signal }));
  expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/maxDepth' } });
  expect(error.message).toBe('/maxDepth must be a non-negative safe integer, got -0');
  expect((await children.list(parent)).entries).toEqual([]);
});

it('messages to a running child queue FIFO as its next turns; interrupt now stops the turn and keeps the inbox', async () => {
  const { daemon, server } = await setup();
  const parent = { sessionId: 'harness-2', cwd: daemon.dir };
  // The first turn outlasts the two sends: they queue behind it.
  server.enqueue(slowText('one', 3000), textResponse(['two']), textResponse(['three']));
  const children = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const seen = collect(children);
  const { childId } = await children.start('spawn', { prompt: text('first'), parent, label: 'queue', signal: new AbortController().signal });
  const m2 = await children.sendMessage(childId, text('second'), parent);
  const m3 = await children.sendMessage(childId, text('third'), parent);
  expect(m2.messageId).not.toBe(m3.messageId);
  // One notice, when the inbox is empty: after the third turn.
  const notice = await seen.nth(1);
  expect(notice.text).toBe('queue finished. Its closing message:\nthree');
  expect(server.requests).toHaveLength(3);
  expect(transcript(server, 2)).toEqual(['user:first', 'assistant:one', 'user:second', 'assistant:two', 'user:third']);

  // Interrupt `now`: the running turn stops; the parent hears the child was stopped.
  server.enqueue(slowText('never', 5000));
  await children.sendMessage(childId, text('fourth'), parent);
  const deadline = Date.now() + 5000;
  while (server.requests.length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await children.interrupt(childId, parent, 'now');
  const stopped = await seen.nth(2);
  expect(stopped).toMatchObject({ childId, stopReason: 'aborted' });
  expect(stopped.text).toMatch(/^queue was stopped before it finished\. /);
  expect((await children.list(parent)).entries).toMatchObject([{ id: childId, status: 'idle' }]);
});

it('an owner that was not connected gets the settlement notice when it attaches again', async () => {
  const { daemon, server } = await setup();
  const parent = { sessionId: 'harness-3', cwd: daemon.dir };
  server.enqueue(slowText('finished while you were away', 600));
  const gone = await clients.connect(daemon.socket, { ownerKey: KEY_A });
  const { childId } = await childrenOf(gone).start('spawn', { prompt: text('work'), parent, signal: new AbortController().signal });
  await gone.close();
  // Watch through the ops surface (no owner key): the turn settles while the owner is away.
  const ops = (await clients.connect(daemon.socket)).ops;
  const deadline = Date.now() + 10_000;
  while (!(await ops.runs({ state: 'settled' })).some((run) => run.id === childId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));

  const back = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const other = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_B }));
  const othersSeen = collect(other);
  const seen = collect(back);
  expect(await seen.nth(1)).toMatchObject({ childId, parentId: 'harness-3', stopReason: 'completed' });
  expect((await seen.nth(1)).text).toContain('finished while you were away');
  // Another owner never hears of it.
  expect(othersSeen.notices).toEqual([]);
});

it('a continuable child reports to its parent with its report tool without ending its turn', async () => {
  const { daemon, server } = await setup();
  const parent = { sessionId: 'harness-4', cwd: daemon.dir };
  const call = { tool_calls: [{ index: 0, id: 'call-1', type: 'function', function: { name: 'report', arguments: '{"output":"halfway there","mode":"next-step"}' } }] };
  server.enqueue(
    { type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { data: chunk(call, { finish_reason: 'tool_calls' }) }, { done: true }] },
    textResponse(['all done']),
  );
  const children = childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_A }));
  const reports: unknown[] = [];
  children.onReport((report) => reports.push(report));
  const seen = collect(children);
  const { childId } = await children.start('spawn', { prompt: text('work'), parent, label: 'reporter', signal: new AbortController().signal });
  expect((await seen.nth(1)).text).toBe('reporter finished. Its closing message:\nall done');
  expect(reports).toEqual([{ childId, parentId: 'harness-4', label: 'reporter', output: 'halfway there', mode: 'next-step' }]);
  // The turn went on after the report: the model's second request carries the tool's answer.
  expect(transcript(server, 1).at(-1)).toMatch(/^tool:reported; your parent sees it at its next step/);
});

it('the model-facing tool in continuable mode drives the client\'s children: start, send_message, a second client refused', async () => {
  const { daemon, server } = await setup();
  server.enqueue(textResponse(['first turn']), textResponse(['second turn']));
  const service = await clients.connect(daemon.socket, { ownerKey: KEY_A });
  const handle = createSubagentTool(service, { provider: 'spawn', backgroundMode: 'continuable' });
  const notices: string[] = [];
  handle.onChildSettled((notice) => void notices.push(notice.text));
  const tool = handle.current();
  expect(tool).toBeDefined();
  const parent = { sessionId: 'model-parent', cwd: daemon.dir };
  const started = await tool!.execute({ description: 'a helper', prompt: 'do one thing' }, { parent });
  expect(started.isError).toBe(false);
  const childId = /started subagent (\S+) /.exec(started.content.map((b) => (b.type === 'text' ? b.text : '')).join(''))![1]!;
  const deadline = Date.now() + 10_000;
  while (notices.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(notices[0]).toBe('a helper finished. Its closing message:\nfirst turn');

  const control = createChildControlTools(service.children!);
  expect((await control.sendMessage.execute({ subagent_id: childId, message: 'and another' }, { parent })).isError).toBe(false);
  while (notices.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(notices[1]).toBe('a helper finished. Its closing message:\nsecond turn');

  const intruder = createChildControlTools(childrenOf(await clients.connect(daemon.socket, { ownerKey: KEY_B })));
  const refused = await intruder.sendMessage.execute({ subagent_id: childId, message: 'hijack' }, { parent });
  expect(refused.isError).toBe(true);
  expect(refused.content.map((b) => (b.type === 'text' ? b.text : '')).join('')).toContain('NOT_OWNER');
  await handle.dispose();
});
