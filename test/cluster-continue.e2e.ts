/**
 * Continuing children across the members of a pool: real daemons (the built CLI) on a real
 * nats-server, the local chat-completions server recording what the model saw. A child executing
 * on another member is steered through its front; a settled child is resumed on the member that
 * ran it and, once that member is killed, on another one from the mirrored session; a message to
 * a child whose member is gone is refused, typed; a continuable child started through one member
 * runs on another and answers its second message with its first turn in context; a child that
 * cannot be restored (no session) is continued only where it lives; an after-step interrupt
 * reaches the executing member.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { clusterNames } from '../daemon/cluster/names.js';
import { SessionEvents } from '../daemon/cluster/session-events.js';
import { chunk, slowTextResponse, textResponse, type StreamStep } from './support/chat-completions-server.js';
import { clusterModelScene } from './support/cluster-model-scene.js';
import { killAndWait, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { rejection } from './support/assertions.js';

const KEY = 'owner-key-of-the-cluster-test-0123';
const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { sessionId: 'cluster-continue', cwd: process.cwd() };

const { scene, model, member, restart, peer: rawPeer, transcript } = clusterModelScene();
const { clients, records } = scene;

/** The continuations a member's log reports, and where their child came from. */
function continued(daemon: DaemonProcess): Array<{ runId: string; from: string }> {
  return readFileSync(join(daemon.stateDir, 'daemon.log'), 'utf8')
    .split('\n')
    .filter((line) => line.includes('cluster: continuing a child'))
    .map((line) => JSON.parse(line) as { runId: string; from: string })
    .map(({ runId, from }) => ({ runId, from }));
}


/** A continuable child started through `front` that has finished its first turn ("remember the word kiwi"); the model's second answer is queued. */
async function rememberKiwi(front: DaemonProcess) {
  model().enqueue(textResponse(['the first answer']), textResponse(['the word was kiwi']));
  const children = (await clients.connect(front.socket, { ownerKey: KEY })).children!;
  const notices: string[] = [];
  children.onSettled((notice) => void notices.push(notice.text));
  const { childId } = await children.start('spawn', { prompt: text('remember the word kiwi'), parent, label: 'memory', signal: new AbortController().signal });
  await waitFor(() => notices.length === 1, 15_000, () => 'the first settlement notice');
  return { children, notices, childId };
}

type KiwiChildren = Awaited<ReturnType<typeof rememberKiwi>>['children'];
type Store = Awaited<ReturnType<typeof records>>;

/**
 * Asks the kiwi child its second question through `children`: its settlement notice and the
 * model's transcript show the first turn was in context. Returns the child's two turns' records.
 */
async function askWhichWord(children: KiwiChildren, notices: string[], store: Store, childId: string) {
  const before = notices.length;
  await children.sendMessage(childId, text('which word?'), parent);
  await waitFor(() => notices.length === before + 1, 15_000, () => 'the second settlement notice');
  expect(notices.at(-1)).toBe('memory finished. Its closing message:\nthe word was kiwi');
  expect(transcript(1)).toEqual(['user:remember the word kiwi', 'assistant:the first answer', 'user:which word?']);
  const turns = [...store.all()].map((r) => r.record).filter((r) => r.childId === childId);
  expect(turns).toHaveLength(2);
  return turns;
}

it('a child on another member is steered through its front, resumed where it ran, and resumed on a third member from the mirror once that one is killed', async () => {
  const front = await member(0);
  const first = await member();
  const store = await records();
  const service = await clients.connect(front.socket);
  model().enqueue(slowTextResponse('first answer', 1000), textResponse(['steered answer']), textResponse(['resumed here']), textResponse(['resumed elsewhere']));

  const run = (await service.start('spawn', { prompt: text('Initial task'), parent, signal: AbortSignal.timeout(30_000) })) as RemoteSubagentRun;
  expect(typeof run.sendMessage).toBe('function');
  expect(typeof run.resume).toBe('function');
  expect(store.seen(run.id)?.record.worker?.pid).toBe(first.proc.pid);
  await model().waitForRequests(1);
  run.sendMessage!(text('STEER: also check the tests'));
  expect(await run.result).toMatchObject({ stopReason: 'completed', output: text('steered answer') });
  expect(clients.logged).toEqual([]); // delivered, not refused
  expect(transcript(1)).toEqual(['user:Initial task', 'assistant:first answer', 'user:STEER: also check the tests']);

  // Resumed while the member that ran it is up: it continues the very child there.
  const again = (await run.resume!(text('Follow-up one'))) as RemoteSubagentRun;
  expect(again.id).not.toBe(run.id);
  expect(again.childId).toBe(run.childId);
  expect(await again.result).toMatchObject({ stopReason: 'completed', output: text('resumed here') });
  const againRecord = (await store.get(again.id))!.record;
  expect(againRecord).toMatchObject({ state: 'settled', resumes: { runId: run.id, childId: run.childId }, session: run.id });
  expect(againRecord.worker?.pid).toBe(first.proc.pid);

  // That member dies; another one brings the child back from the mirrored session.
  await killAndWait(first);
  const second = await member();
  const third = (await again.resume!(text('Follow-up two'))) as RemoteSubagentRun;
  expect(third.childId).toBe(run.childId);
  expect(await third.result).toMatchObject({ stopReason: 'completed', output: text('resumed elsewhere') });
  expect((await store.get(third.id))!.record.worker?.pid).toBe(second.proc.pid);
  expect(transcript(3)).toEqual([
    'user:Initial task',
    'assistant:first answer',
    'user:STEER: also check the tests',
    'assistant:steered answer',
    'user:Follow-up one',
    'assistant:resumed here',
    'user:Follow-up two',
  ]);
  // The first continuation used the child held in memory, the second the mirrored session.
  expect(continued(first)).toEqual([{ runId: again.id, from: 'held' }]);
  expect(continued(second)).toEqual([{ runId: third.id, from: 'mirror' }]);
  await third.dispose();
}, 60_000);

it('a message to a child whose member was killed is refused with RUN_STATE naming that member; disposing it ends it at once', async () => {
  const front = await member(0);
  const doomed = await member();
  const store = await records();
  model().enqueue(slowTextResponse('never heard', 3000));
  const peer = await rawPeer(front, 'steerer');
  const started = await peer.request('subagent/start', { provider: 'spawn', prompt: text('long task'), parent }, 15_000);
  const runId = (started.result as { runId: string }).runId;
  expect(store.seen(runId)?.record.worker?.pid).toBe(doomed.proc.pid);
  await killAndWait(doomed);
  const refused = await peer.request('run/sendMessage', { runId, content: text('are you there?') }, 15_000);
  expect(refused.error?.data?.code).toBe('RUN_STATE');
  expect(refused.error?.message).toContain(`pid ${doomed.proc.pid}`);
  expect(refused.error?.message).toMatch(/did not answer.*nothing was delivered/);
  // Disposed while nobody answers for it: it ends here, aborted, and its record says disposed.
  expect((await peer.request('run/dispose', { runId }, 15_000)).error).toBeUndefined();
  const waited = await peer.request('run/wait', { runId }, 15_000);
  expect(waited.result).toMatchObject({ stopReason: 'aborted', diagnostic: expect.stringContaining(`pid ${doomed.proc.pid}`) });
  expect((await store.get(runId))!.record).toMatchObject({ state: 'disposed', result: { stopReason: 'aborted' } });
}, 60_000);

it('a continuable child started through one member runs on another and answers its second message with its first turn in context', async () => {
  const front = await member(0);
  const worker = await member();
  const store = await records();
  const { children, notices, childId } = await rememberKiwi(front);
  expect(notices[0]).toBe('memory finished. Its closing message:\nthe first answer');
  const ran = [...store.all()].map((r) => r.record).filter((r) => r.childId === childId);
  expect(ran.map((r) => r.worker?.pid)).toEqual([worker.proc.pid]);
  // The child has its report tool, relayed to the front.
  expect((model().requests[0]!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toContain('report');

  const turns = await askWhichWord(children, notices, store, childId);
  expect(turns.every((r) => r.worker?.pid === worker.proc.pid && r.ownerMember !== r.worker?.id)).toBe(true);
}, 60_000);

it('a child that cannot be restored elsewhere is continued only on the member holding it, cannot migrate when that member dies mid-turn, and is refused once it is gone, queued or not; stand-ins advertise what the real providers have', async () => {
  // A short lease: the continuation cut below is taken over within a second. One slot per
  // member: a continuation pinned to a busy holder waits in the queue.
  const front = await member(0, 1000);
  const holder = await member(1, 1000);
  const store = await records();
  const service = await clients.connect(front.socket);
  // The fixture providers: `echo` steers and resumes but keeps its child in memory (no restore); `bare` does neither.
  const runtime = (name: string) => (service.getProvider(name) as { runtime?: unknown } | undefined)?.runtime;
  expect(runtime('echo')).toEqual({ sendMessage: true, resume: true });
  expect(runtime('bare')).toEqual({ sendMessage: false, resume: false });
  expect(runtime('spawn')).toEqual({ sendMessage: true, resume: true });
  const bare = await service.start('bare', { prompt: text('bare run'), parent, signal: AbortSignal.timeout(30_000) });
  expect([bare.sendMessage, bare.resume]).toEqual([undefined, undefined]);
  await bare.dispose();
  const children = (await clients.connect(front.socket, { ownerKey: KEY })).children!;
  const notContinuable = await children.start('bare', { prompt: text('x'), parent, signal: new AbortController().signal }).catch((error: unknown) => error);
  expect(notContinuable).toMatchObject({ code: 'UNSUPPORTED_OPERATION' });

  // Two children on the holder (the only member executing yet), then a second member joins.
  const run = await service.start('echo', { prompt: text('echo first'), parent, signal: AbortSignal.timeout(30_000) });
  const other = await service.start('echo', { prompt: text('echo other'), parent, signal: AbortSignal.timeout(30_000) });
  expect(await run.result).toMatchObject({ stopReason: 'completed', output: text('echo first') });
  await other.result;
  const heir = await member(1, 1000);
  const again = await run.resume!(text('echo again'));
  expect(await again.result).toMatchObject({ stopReason: 'completed', output: text('echo again') });
  const holderId = store.seen(run.id)!.record.worker!.id;
  expect((await store.get(again.id))!.record).toMatchObject({ pin: holderId, worker: { pid: holder.proc.pid } });
  // One turn at a time: the chain's settled run cannot be resumed while a later one is queued or running.
  const hung = await again.resume!(text('hang'));
  expect(await rejection(run.resume!(text('echo twice')))).toMatchObject({ code: 'RUN_STATE' });
  await waitFor(() => store.seen(hung.id)?.record.childId !== undefined, 10_000, () => 'the pinned continuation running');
  // The other child is pinned to the holder too, whose one slot is taken: its continuation waits queued.
  const queued = rejection(other.resume!(text('echo queued')));
  await waitFor(() => [...store.all()].some((r) => r.record.state === 'queued' && r.record.resumes?.runId === other.id), 10_000, () => 'the queued pinned continuation');

  await killAndWait(holder);
  // Queued: the front finds the holder gone and ends it unclaimed, instead of letting it wait forever.
  const abandoned = await queued;
  expect(abandoned.code).toBe('RUN_STATE');
  expect(abandoned.message).toMatch(new RegExp(`pid ${holder.proc.pid}.*cannot be continued elsewhere`));
  // Running: the member taking the ticket over cannot bring the child back, and says so.
  const cut = await hung.result;
  expect(cut.stopReason).toBe('error');
  expect(cut.diagnostic).toMatch(/cannot migrate/);
  expect(cut.diagnostic).toContain(`pid ${holder.proc.pid}`);
  expect((await store.get(hung.id))!.record.worker?.pid).toBe(heir.proc.pid);
  // Settled: refused before anything is queued.
  const refused = await rejection(again.resume!(text('echo once more')));
  expect(refused.code).toBe('RUN_STATE');
  expect(refused.message).toMatch(new RegExp(`pid ${holder.proc.pid}.*cannot be continued elsewhere`));
}, 60_000);

it('a continuable child survives a restart of the member its client uses: the restarted front resumes it from its record, on a member that restores it from the mirror', async () => {
  const front = await member(0);
  const worker = await member();
  const store = await records();
  const { childId } = await rememberKiwi(front);

  await clients.closeAll();
  const exited = new Promise((resolve) => front.proc.once('exit', resolve));
  front.proc.kill('SIGTERM');
  await exited;
  const restarted = await restart(front);

  const again = (await clients.connect(restarted.socket, { ownerKey: KEY })).children!;
  const later: string[] = [];
  again.onSettled((notice) => void later.push(notice.text));
  // The stopping front had the worker release the first turn (its record stays settled), so the worker restored the child.
  const turns = await askWhichWord(again, later, store, childId);
  const [, second] = turns.sort((a, b) => a.queuedAt.localeCompare(b.queuedAt));
  expect(continued(worker)).toEqual([{ runId: second!.runId, from: 'mirror' }]);
}, 60_000);

it('an after-step interrupt reaches a child on another member: its step and tool call finish, then the turn ends without another model step', async () => {
  const front = await member(0);
  await member();
  const store = await records();
  const slowToolStep: StreamStep[] = [
    { data: chunk({ role: 'assistant', content: '' }) },
    { repeat: { data: chunk({ content: '' }) }, everyMs: 50, forMs: 1000 },
    { data: chunk({ tool_calls: [{ index: 0, id: 'call-1', type: 'function', function: { name: 'list_directory', arguments: '{"path":"."}' } }] }) },
    { data: chunk({}, { finish_reason: 'tool_calls' }) },
    { done: true },
  ];
  model().enqueue({ type: 'stream', steps: slowToolStep }, textResponse(['never asked']));
  const peer = await rawPeer(front, 'interrupter');
  const started = await peer.request('subagent/start', { provider: 'spawn', prompt: text('task'), parent }, 15_000);
  const runId = (started.result as { runId: string }).runId;
  await model().waitForRequests(1);
  expect((await peer.request('run/cancel', { runId, level: 'after-step' })).error).toBeUndefined();
  const waited = await peer.request('run/wait', { runId }, 15_000);
  expect(waited.result).toMatchObject({ stopReason: 'aborted' });
  expect(model().requests).toHaveLength(1);
  // The executing member's session, as the cluster mirrored it: the tool ran, then the turn ended.
  const link = await scene.link();
  const lines = await (await SessionEvents.open(link, clusterNames())).readAll<{ type?: string; diagnostic?: string }>(runId);
  expect(lines.slice(1).map((line) => line.type)).toEqual(['user/message', 'assistant/message', 'tool/result', 'turn/end']);
  expect(lines.at(-1)).toMatchObject({ diagnostic: 'interrupted after a step' });
  expect(store.seen(runId)?.record.state).toBe('settled');
}, 60_000);
