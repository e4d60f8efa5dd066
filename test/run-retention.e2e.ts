/**
 * Stored runs at scale against a real daemon: runs a previous daemon left are archived at start
 * and pruned to the configured count, `runs/list` pages over the archive newest first,
 * `daemon/gc` applies retention on demand and says what it removed, and `status` counts only
 * this daemon's runs (never the stored ones).
 */
import { mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';

let daemon: DaemonProcess | undefined;
let client: RemoteSubagentService | undefined;

afterAll(async () => {
  await client?.close();
  await daemon?.stop();
});

const stored = (n: number): string =>
  `${JSON.stringify({
    runId: `old-${String(n).padStart(5, '0')}`,
    id: `old-child-${n}`,
    provider: 'echo',
    tokenHash: 'ab'.repeat(32),
    state: n % 3 === 0 ? 'settled' : 'disposed',
    startedAt: new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString(),
    settledAt: new Date().toISOString(),
    daemonEpoch: 'previous',
    daemonPid: 1,
  })}\n`;

it('archives, pages, collects on demand and keeps status independent of the stored runs', async () => {
  const first = await startDaemon({ detachGraceMs: 0, retention: { runs: { maxCount: 1000 }, sessions: { maxCount: 2 } } });
  first.proc.kill('SIGTERM');
  await new Promise((resolve) => first.proc.once('exit', resolve));
  writeFileSync(join(first.stateDir, 'runs.jsonl'), Array.from({ length: 1500 }, (_, n) => stored(n)).join(''));
  daemon = await restartDaemon(first);
  client = await connect({ socket: daemon.socket });

  // Start-up archived the 1500 and kept the newest 1000.
  const page = await client.ops.runsPage({ limit: 100 });
  expect(page.runs.map((r) => r.runId)).toEqual(Array.from({ length: 100 }, (_, i) => `old-${String(1499 - i).padStart(5, '0')}`));
  const next = await client.ops.runsPage({ limit: 100, cursor: page.nextCursor! });
  expect(next.runs[0]!.runId).toBe('old-01399');
  expect((await client.ops.runsPage({ limit: 1000, cursor: 'old-00600' })).runs.map((r) => r.runId)).toEqual(
    Array.from({ length: 100 }, (_, i) => `old-${String(599 - i).padStart(5, '0')}`),
  );
  expect((await client.ops.inspect('old-00500')).run.state).toBe('disposed');
  await expect(client.ops.inspect('old-00499')).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });

  for (let i = 0; i < 3; i++) {
    const run = await client.start('echo', { prompt: [{ type: 'text', text: `new ${i}` }], parent: { sessionId: 'p', cwd: '/' }, signal: new AbortController().signal });
    await run.result;
    await run.dispose();
  }
  const sessions = join(daemon.stateDir, 'sessions');
  mkdirSync(sessions, { recursive: true });
  const before = readdirSync(sessions).filter((name) => name.endsWith('.jsonl')).length;
  for (let i = 0; i < 4; i++) {
    const file = join(sessions, `orphan-${i}.jsonl`);
    writeFileSync(file, '{}\n');
    utimesSync(file, new Date(Date.now() - (10 - i) * 60_000), new Date(Date.now() - (10 - i) * 60_000));
  }

  const status = await client.ops.status();
  expect(status.runs).toEqual({ starting: 0, running: 0, settled: 0, disposed: 3 });

  const gc = await client.ops.gc();
  expect(gc).toEqual({ runsArchived: 3, runsRemoved: 3, sessionsRemoved: before + 4 - 2, runsStored: 1000 });
  expect(readdirSync(sessions).filter((name) => name.endsWith('.jsonl'))).toHaveLength(2);
  // The three new runs are the newest stored ones; the three oldest went.
  const newest = await client.ops.runsPage({ limit: 4 });
  expect(newest.runs.map((r) => r.provider)).toEqual(['echo', 'echo', 'echo', 'echo']);
  expect(newest.runs.slice(0, 3).every((r) => !r.runId.startsWith('old-'))).toBe(true);
  await expect(client.ops.inspect('old-00502')).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
  expect((await client.ops.inspect('old-00503')).run.runId).toBe('old-00503');
  expect(await client.ops.gc()).toEqual({ runsArchived: 0, runsRemoved: 0, sessionsRemoved: 0, runsStored: 1000 });
});
