/**
 * The pool fences a child against two members at once, with real daemons (the built CLI) on a
 * real nats-server and the local chat-completions server: two fronts racing to resume one
 * settled run (the client re-attached it through the second) let exactly one continuation run;
 * the other is refused with RUN_STATE naming it, and may resume once it settled; a claim whose
 * run was never queued lapses. A run re-attached through another member while it runs is
 * steered from there.
 */
import { expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { SubagentError } from '../protocol/index.js';
import { slowTextResponse, textResponse } from './support/chat-completions-server.js';
import { clusterModelScene } from './support/cluster-model-scene.js';
import { killAndWait } from './support/daemon-process.js';
import { rejection } from './support/assertions.js';

const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { sessionId: 'cluster-fence', cwd: process.cwd() };

const { scene, model, member, peer: rawPeer, transcript } = clusterModelScene();
const { clients, records } = scene;

/** The user turns of the model's `n`-th request. */
const userTurns = (n: number): string[] => transcript(n).flatMap((line) => (line.startsWith('user:') ? [line.slice('user:'.length)] : []));

it('two members racing to resume one settled child: exactly one continuation runs, the other is refused naming it, and resumes once it settled; a claim never queued lapses after 30 s', async () => {
  const a = await member(0);
  const b = await member(0);
  const first = await member();
  const store = await records();
  model().enqueue(textResponse(['first answer']), slowTextResponse('continued once', 3000), textResponse(['continued after']), textResponse(['after the lapse']));

  const viaA = await clients.connect(a.socket);
  const run = (await viaA.start('spawn', { prompt: text('Initial task'), parent, signal: AbortSignal.timeout(30_000) })) as RemoteSubagentRun;
  expect(await run.result).toMatchObject({ stopReason: 'completed', output: text('first answer') });
  expect(store.seen(run.id)?.record.worker?.pid).toBe(first.proc.pid);
  // The member holding the child dies; the next one (two slots) could restore it from the
  // mirrored session twice at once.
  await killAndWait(first);
  const worker = await member();
  // The client re-attaches the settled run through B too: both members can resume its child
  // (A holds the chain, B restores it from the record).
  const viaB = await clients.connect(b.socket);
  const adopted = await viaB.adopt(run.id, run.runToken);
  expect(typeof adopted.resume).toBe('function');

  const raced = await Promise.allSettled([run.resume!(text('Resume via A')), adopted.resume!(text('Resume via B'))]);
  const won = raced.filter((r): r is PromiseFulfilledResult<RemoteSubagentRun> => r.status === 'fulfilled').map((r) => r.value);
  const lost = raced.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
  expect(won).toHaveLength(1);
  expect(lost).toHaveLength(1);
  const winner = won[0]!;
  expect(lost[0]).toBeInstanceOf(SubagentError);
  expect(lost[0]).toMatchObject({ code: 'RUN_STATE', message: expect.stringContaining(`continued by run ${winner.id}`) });
  expect(await winner.result).toMatchObject({ stopReason: 'completed', output: text('continued once') });
  // The model saw one continuation: the child ran once.
  expect(model().requests).toHaveLength(2);
  expect((await store.get(winner.id))!.record.worker?.pid).toBe(worker.proc.pid);
  const resumedVia = userTurns(1).at(-1)!;
  expect(['Resume via A', 'Resume via B']).toContain(resumedVia);
  expect((await store.get(run.id))!.record.continuedBy?.runId).toBe(winner.id);
  expect([...store.all()].filter((r) => r.record.resumes?.childId === run.childId).map((r) => r.record.runId)).toEqual([winner.id]);

  // Once the winner settled, the loser's member may continue the child: the claim moves on.
  const loserHandle = resumedVia === 'Resume via A' ? adopted : run;
  const next = await loserHandle.resume!(text('After the first'));
  expect(await next.result).toMatchObject({ stopReason: 'completed', output: text('continued after') });
  expect(userTurns(2)).toEqual(['Initial task', resumedVia, 'After the first']);
  expect((await store.get(run.id))!.record.continuedBy?.runId).toBe(next.id);
  expect((await store.get(next.id))!.record.worker?.pid).toBe(worker.proc.pid);
  expect(model().requests).toHaveLength(3);

  // A claim whose run never got a record (its front died between claiming and queueing) holds
  // the child for 30 s, then lapses.
  const head = (await store.get(run.id))!;
  const ghost = { runId: 'run_never_queued', at: new Date().toISOString() };
  await store.transition(run.id, { ...head.record, continuedBy: ghost }, head.revision);
  const held = await rejection(next.resume!(text('Blocked')));
  expect(held).toMatchObject({ code: 'RUN_STATE', message: expect.stringContaining('continued by run run_never_queued') });
  const blocked = (await store.get(run.id))!;
  await store.transition(run.id, { ...blocked.record, continuedBy: { ...ghost, at: new Date(Date.now() - 31_000).toISOString() } }, blocked.revision);
  const last = await next.resume!(text('After the lapse'));
  expect(await last.result).toMatchObject({ stopReason: 'completed', output: text('after the lapse') });
  expect(model().requests).toHaveLength(4);
  await last.dispose();
}, 60_000);

it('a run re-attached through another member while it runs is steered from there; a provider that cannot steer is refused there, typed, and cancel still reaches the worker', async () => {
  const a = await member(0);
  const b = await member(0);
  const worker = await member();
  const store = await records();
  model().enqueue(slowTextResponse('first answer', 2000), textResponse(['steered answer']));
  const viaA = await clients.connect(a.socket);
  const run = (await viaA.start('spawn', { prompt: text('Initial task'), parent, signal: AbortSignal.timeout(30_000) })) as RemoteSubagentRun;
  await model().waitForRequests(1);

  // The client re-attaches it through B while it executes on the worker.
  const onB = await rawPeer(b, 'steer-via-b');
  expect((await onB.request('run/attach', { runId: run.id, runToken: run.runToken }, 15_000)).error).toBeUndefined();
  expect((await store.get(run.id))!.record).toMatchObject({ state: 'running', worker: { pid: worker.proc.pid } });
  const steered = await onB.request('run/sendMessage', { runId: run.id, content: text('STEER via B') }, 15_000);
  expect(steered.error).toBeUndefined();
  const waited = await onB.request('run/wait', { runId: run.id }, 15_000);
  expect(waited.result).toMatchObject({ stopReason: 'completed', output: text('steered answer') });
  // The worker's child took the message at its next step.
  expect(transcript(1)).toEqual([
    'user:Initial task',
    'assistant:first answer',
    'user:STEER via B',
  ]);
  expect((await onB.request('run/sendMessage', { runId: run.id, content: text('too late') }, 15_000)).error?.data?.code).toBe('RUN_STATE');

  // A provider that cannot steer: the re-attached run offers no steering either.
  const bare = (await viaA.start('bare', { prompt: text('hang'), parent, signal: AbortSignal.timeout(30_000) })) as RemoteSubagentRun;
  expect((await onB.request('run/attach', { runId: bare.id, runToken: bare.runToken }, 15_000)).error).toBeUndefined();
  expect((await onB.request('run/sendMessage', { runId: bare.id, content: text('hello?') }, 15_000)).error?.data?.code).toBe('UNSUPPORTED_OPERATION');
  // Cancel still reaches the worker from B.
  expect((await onB.request('run/cancel', { runId: bare.id }, 15_000)).error).toBeUndefined();
  expect((await onB.request('run/wait', { runId: bare.id }, 15_000)).result).toMatchObject({ stopReason: 'aborted' });
}, 60_000);
