/**
 * `runs/list` pages: newest first, a cursor that is the last run id of the previous page, and
 * filters (state, provider, mine, since) applied before the cut — against a real daemon, with
 * runs of this daemon and of the one before it (read back from the run index).
 */
import { afterAll, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';

let daemon: DaemonProcess;
let alice: RemoteSubagentService;
let bob: RemoteSubagentService;
const started: string[] = []; // run ids, oldest first

const run = async (service: RemoteSubagentService, provider: string, text: string): Promise<void> => {
  const handle = await service.start(provider, { prompt: [{ type: 'text', text }], parent: { sessionId: 'p', cwd: '/' }, signal: new AbortController().signal });
  started.push(handle.id);
  await handle.result;
  await handle.dispose();
};

afterAll(async () => {
  await alice?.close();
  await bob?.close();
  await daemon?.stop();
});

it('pages newest first across this daemon and the previous one, with filters applied before the cut', async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
  const first = await connect({ socket: daemon.socket });
  for (let i = 0; i < 6; i++) await run(first, 'echo', `echo old ${i}`);
  await first.close();
  daemon.proc.kill('SIGKILL');
  await new Promise((resolve) => daemon.proc.once('exit', resolve));
  daemon = await restartDaemon(daemon);

  alice = await connect({ socket: daemon.socket });
  bob = await connect({ socket: daemon.socket });
  for (let i = 0; i < 7; i++) await run(alice, 'echo', `echo alice ${i}`);
  for (let i = 0; i < 3; i++) await run(bob, 'bare', `echo bob ${i}`);
  const newestFirst = [...started].reverse();

  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await alice.ops.runsPage({ limit: 4, ...(cursor !== undefined && { cursor }) });
    pages.push(page.runs.map((info) => info.runId));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  expect(pages.map((page) => page.length)).toEqual([4, 4, 4, 4]);
  expect(pages.flat()).toEqual(newestFirst);

  const mine = await alice.ops.runsPage({ mine: true, limit: 100 });
  expect(mine.runs.map((info) => info.runId)).toEqual(newestFirst.slice(3, 10));
  expect(mine.nextCursor).toBeUndefined();

  const bare = await alice.ops.runsPage({ provider: 'bare', limit: 2 });
  expect(bare.runs.map((info) => info.runId)).toEqual(newestFirst.slice(0, 2));
  expect(bare.nextCursor).toBe(newestFirst[1]);

  const since = (await alice.ops.runsPage({ limit: 1, cursor: newestFirst[2]! })).runs[0]!.startedAt;
  const recent = await alice.ops.runsPage({ since });
  expect(recent.runs.map((info) => info.runId)).toEqual(newestFirst.filter((id) => recent.runs.some((r) => r.runId === id)));
  expect(recent.runs.length).toBeGreaterThanOrEqual(4);
  expect(recent.runs.every((info) => info.startedAt >= since)).toBe(true);

  await expect(alice.ops.runsPage({ limit: 0 })).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
}, 60_000);
