/** The on-disk state: the run index (torn and corrupt lines), the local ledger over it, and session retention. */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RunIndex, type IndexedRun } from '../daemon/store/run-index.js';
import { pruneSessions } from '../daemon/store/session-retention.js';
import { LocalLedger } from '../daemon/store/local-ledger.js';
import type { NewRun } from '../daemon/store/run-ledger.js';
import { makeTempDir } from './support/daemon-process.js';

const silent = pino({ level: 'silent' });
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const temp = (): string => {
  const dir = makeTempDir('subagentd-store-');
  dirs.push(dir);
  return dir;
};
const run = (runId: string, state: IndexedRun['state'] = 'running'): IndexedRun => ({
  runId,
  id: `child-${runId}`,
  provider: 'spawn',
  tokenHash: 'ab'.repeat(32),
  state,
  startedAt: new Date(0).toISOString(),
  worker: { id: 'e1', host: 'localhost', pid: 1 },
  revision: 1,
});

describe('RunIndex', () => {
  it('keeps the last line per run across reopenings; finished runs move to the archive', () => {
    const path = join(temp(), 'runs.jsonl');
    const index = new RunIndex(path);
    index.put(run('a'));
    index.put({ ...index.get('a')!, state: 'settled' });
    index.put(run('b'));
    index.close();
    // Changes to one run within a turn are written once, as the latest record.
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
    const reopened = new RunIndex(path);
    expect(reopened.get('a')?.state).toBe('settled');
    expect(reopened.all().map((r) => r.runId)).toEqual(['b']);
    reopened.close();
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('tolerates and reports a torn last line', () => {
    const path = join(temp(), 'runs.jsonl');
    const index = new RunIndex(path);
    index.put(run('a'));
    index.close();
    appendFileSync(path, '{"runId":"b","sta');
    const reopened = new RunIndex(path);
    expect(reopened.problems).toEqual({ tornTail: true, corrupt: [] });
    expect(reopened.all().map((r) => r.runId)).toEqual(['a']);
    reopened.close();
  });

  it('reports a corrupt line by number and keeps a copy of the evidence', () => {
    const dir = temp();
    const path = join(dir, 'runs.jsonl');
    writeFileSync(path, `${JSON.stringify(run('a'))}\nnot json\n${JSON.stringify(run('b'))}\n`);
    const index = new RunIndex(path);
    expect(index.problems.corrupt).toEqual([{ line: 2, reason: expect.any(String) }]);
    expect(index.all()).toHaveLength(2);
    expect(readdirSync(dir).some((name) => name.startsWith('runs.jsonl.corrupt-'))).toBe(true);
    index.close();
  });

  it('writes a later change of a run as the changed fields only, and reads it back onto the record before it', () => {
    const path = join(temp(), 'runs.jsonl');
    const output = 'x'.repeat(50_000);
    const index = new RunIndex(path);
    index.put(run('a'));
    index.flush();
    const settled = { ...index.get('a')!, state: 'settled' as const, revision: 2, result: { output: [{ type: 'text' as const, text: output }], stopReason: 'completed' } };
    index.put(settled);
    index.flush();
    index.put({ ...index.get('a')!, state: 'disposed', revision: 3 });
    index.flush();
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0]!)).toEqual(run('a')); // the first line is the whole record
    expect(JSON.parse(lines[1]!)).toEqual({ runId: 'a', change: { state: 'settled', revision: 2, result: settled.result } });
    expect(JSON.parse(lines[2]!)).toEqual({ runId: 'a', change: { state: 'disposed', revision: 3 } }); // not the output again
    expect(lines[2]!.length).toBeLessThan(100);
    // A removed field needs a whole line.
    const { result: _dropped, ...withoutResult } = index.get('a')!;
    index.put({ ...withoutResult, revision: 4 });
    index.flush();
    expect(JSON.parse(readFileSync(path, 'utf8').trim().split('\n')[3]!)).toEqual({ ...withoutResult, revision: 4 });
    index.close();
    // The first three lines read back (alone, as the open's compaction archives a finished run).
    const copy = join(temp(), 'runs.jsonl');
    writeFileSync(copy, lines.map((line) => `${line}\n`).join(''));
    const reopened = new RunIndex(copy);
    expect(reopened.problems.corrupt).toEqual([]);
    expect(reopened.get('a')).toEqual({ ...settled, state: 'disposed', revision: 3 });
    reopened.close();
  });

  it('reports a change of a run with no record before it as corrupt', () => {
    const path = join(temp(), 'runs.jsonl');
    writeFileSync(path, `${JSON.stringify({ runId: 'ghost', change: { state: 'disposed', revision: 2 } })}\n${JSON.stringify(run('b'))}\n`);
    const index = new RunIndex(path);
    expect(index.problems.corrupt).toEqual([{ line: 1, reason: 'a change of a run with no record before it' }]);
    expect(index.all().map((r) => r.runId)).toEqual(['b']);
    index.close();
  });

  it('after a compaction, changes follow the whole lines it wrote', async () => {
    const path = join(temp(), 'runs.jsonl');
    const index = new RunIndex(path);
    index.put(run('a'));
    index.put(run('b', 'settled'));
    index.archiveFinished(); // the log is rewritten as one whole line per kept run
    expect(readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as IndexedRun)).toEqual([run('a')]);
    index.put({ ...index.get('a')!, state: 'settled', revision: 2 });
    index.put({ ...index.get('b')!, state: 'disposed', revision: 2 }); // from the archive: not in the log, so whole
    index.flush();
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as object);
    expect(lines.slice(1)).toEqual([{ runId: 'a', change: { state: 'settled', revision: 2 } }, { ...run('b'), state: 'disposed', revision: 2 }]);
    index.close();
  });
});

describe('LocalLedger', () => {
  const limits = { maxConcurrentRuns: 1, maxRunsPerConnection: 1, maxQueued: 4 };
  const fresh = (ledger: LocalLedger, runId: string): NewRun => {
    const { revision: _revision, ...rest } = run(runId);
    return { ...rest, worker: ledger.worker };
  };

  it('creates at revision 1 and refuses a taken run id', async () => {
    const index = new RunIndex(join(temp(), 'runs.jsonl'));
    const ledger = new LocalLedger(index, limits, 'epoch-a');
    expect(await ledger.create(fresh(ledger, 'a'))).toMatchObject({ runId: 'a', revision: 1, worker: { id: 'epoch-a', pid: process.pid } });
    await expect(ledger.create(fresh(ledger, 'a'))).rejects.toMatchObject({ code: 'REVISION_CONFLICT' });
    await ledger.close();
  });

  it("writes a turn's changes, newest record per run, at flush (before a client write), else at the turn's end", async () => {
    const path = join(temp(), 'runs.jsonl');
    const index = new RunIndex(path);
    const ledger = new LocalLedger(index, limits, 'epoch-a');
    const onDisk = (): string[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : []);
    const created = await Promise.all(['a', 'b', 'c'].map((id) => ledger.create(fresh(ledger, id))));
    // Readable at once (a nested start looks its parent up), not yet written.
    expect(await ledger.get('b')).toMatchObject({ runId: 'b', revision: 1 });
    expect(onDisk()).toEqual([]);
    // A run that settles in the same turn is one line: the newest record of each run.
    await ledger.transition('a', { state: 'settled', settledAt: created[0]!.startedAt }, 1);
    index.flush(); // what a connection does before it writes to its client
    expect(onDisk().map((line) => [JSON.parse(line).runId, JSON.parse(line).state])).toEqual([
      ['b', 'running'],
      ['c', 'running'],
      ['a', 'settled'],
    ]);
    await ledger.transition('b', { state: 'settled', settledAt: created[1]!.startedAt }, 1);
    expect(onDisk()).toHaveLength(3);
    await new Promise((resolve) => setImmediate(resolve));
    // b was in the file: its settle is written as the change.
    expect(onDisk().map((line) => JSON.parse(line).state ?? JSON.parse(line).change?.state)).toEqual(['running', 'running', 'settled', 'settled']);
    expect(JSON.parse(onDisk()[3]!)).toMatchObject({ runId: 'b', change: { state: 'settled', revision: 2 } });
    await ledger.close();
  });

  it('transitions by compare-and-set: a stale revision is a conflict and changes nothing', async () => {
    const path = join(temp(), 'runs.jsonl');
    const ledger = new LocalLedger(new RunIndex(path), limits, 'epoch-a');
    await ledger.create(fresh(ledger, 'a'));
    const settled = await ledger.transition('a', { state: 'settled' }, 1);
    expect(settled).toMatchObject({ state: 'settled', revision: 2 });
    await expect(ledger.transition('a', { state: 'disposed' }, 1)).rejects.toMatchObject({ code: 'REVISION_CONFLICT' });
    await expect(ledger.transition('nobody', { state: 'disposed' }, 1)).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
    await ledger.close();
    const reopened = new LocalLedger(new RunIndex(path), limits, 'epoch-b');
    expect(await reopened.get('a')).toMatchObject({ state: 'settled', revision: 2 });
    await reopened.close();
  });

  it('reads records written before worker and revision, and lists what a gone daemon left unfinished', async () => {
    const path = join(temp(), 'runs.jsonl');
    const legacy = (runId: string, state: string): string =>
      JSON.stringify({ runId, id: `child-${runId}`, provider: 'spawn', tokenHash: 'ab'.repeat(32), state, startedAt: new Date(0).toISOString(), daemonEpoch: 'old', daemonPid: 77 });
    writeFileSync(path, `${legacy('r', 'running')}\n${legacy('c', 'checkpointed')}\n${legacy('s', 'settled')}\n`);
    const ledger = new LocalLedger(new RunIndex(path), limits, 'epoch-now');
    await ledger.create(fresh(ledger, 'mine'));
    const left = await ledger.leftBehind();
    expect(left.map((r) => [r.runId, r.revision, r.worker.id, r.worker.pid])).toEqual([
      ['r', 0, 'old', 77],
      ['c', 0, 'old', 77],
    ]);
    expect(await ledger.transition('r', { state: 'settled' }, 0)).toMatchObject({ revision: 1, worker: { id: 'old' } });
    await ledger.close();
  });

  it('admits within the budget and releases each lease once', async () => {
    const ledger = new LocalLedger(new RunIndex(join(temp(), 'runs.jsonl')), limits, 'epoch-a');
    const never = new AbortController().signal;
    const first = await ledger.admit('a', 'spawn', never);
    let second = false;
    const waiting = ledger.admit('b', 'spawn', never).then((lease) => ((second = true), lease));
    await Promise.resolve();
    expect(second).toBe(false);
    expect(ledger.admission()).toMatchObject({ running: 1, queued: 1 });
    first.release();
    first.release();
    (await waiting).release();
    expect(ledger.admission()).toMatchObject({ running: 0, queued: 0 });
    await ledger.close();
  });
});

describe('pruneSessions', () => {
  it('removes only session logs untouched for longer than the retention', () => {
    const dir = join(temp(), 'sessions');
    mkdirSync(dir);
    const old = join(dir, 'old.jsonl');
    const fresh = join(dir, 'fresh.jsonl');
    const other = join(dir, 'notes.txt');
    for (const f of [old, fresh, other]) writeFileSync(f, '{}\n');
    const tenDaysAgo = (Date.now() - 10 * 86_400_000) / 1000;
    utimesSync(old, tenDaysAgo, tenDaysAgo);
    utimesSync(other, tenDaysAgo, tenDaysAgo);
    expect(pruneSessions(dir, 7 * 86_400_000, silent)).toBe(1);
    expect([existsSync(old), existsSync(fresh), existsSync(other)]).toEqual([false, true, true]);
  });
});
