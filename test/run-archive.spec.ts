/**
 * The run archive and retention: finished runs leave memory for the archive at open, start-up
 * reads the offset index and not the records, crashes between the two files are repaired, a
 * run changed after archiving reads back once with its newest record, and retention by age and
 * count removes the oldest archived runs only.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RunIndex, type IndexedRun } from '../daemon/store/run-index.js';
import { pruneRuns } from '../daemon/store/run-retention.js';
import { pruneSessions } from '../daemon/store/session-retention.js';
import { makeTempDir } from './support/daemon-process.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const indexPath = (): string => {
  const dir = makeTempDir('subagentd-archive-');
  dirs.push(dir);
  return join(dir, 'runs.jsonl');
};
const day = 86_400_000;
const run = (n: number, state: IndexedRun['state'], settledDaysAgo = 0): IndexedRun => ({
  runId: `run-${String(n).padStart(4, '0')}`,
  id: `child-${n}`,
  provider: n % 2 === 0 ? 'spawn' : 'fork',
  tokenHash: 'ab'.repeat(32),
  state,
  startedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  ...(state !== 'running' && { settledAt: new Date(Date.now() - settledDaysAgo * day).toISOString() }),
  worker: { id: 'e1', host: 'localhost', pid: 1 },
  revision: 1,
});
const seed = (path: string, runs: IndexedRun[]): void => writeFileSync(path, runs.map((r) => `${JSON.stringify(r)}\n`).join(''));
const ids = (runs: Iterable<IndexedRun>): string[] => [...runs].map((r) => r.runId);
const archiveOf = (path: string): string => path.replace('runs.jsonl', 'runs.archive.jsonl');

describe('RunIndex over the archive', () => {
  it('keeps only runs that may change in memory and lists every run newest first', () => {
    const path = indexPath();
    seed(path, [run(1, 'disposed'), run(2, 'settled'), run(3, 'running'), run(4, 'checkpointed'), run(5, 'disposed')]);
    const index = new RunIndex(path);
    expect(ids(index.all())).toEqual(['run-0003', 'run-0004']);
    expect(ids(index.newestFirst())).toEqual(['run-0004', 'run-0003', 'run-0005', 'run-0002', 'run-0001']);
    expect(index.get('run-0002')?.state).toBe('settled');
    expect(index.get('run-9999')).toBeUndefined();
    index.close();
    // The log keeps only the runs held in memory; the archive holds the rest, one line each.
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
    expect(readFileSync(archiveOf(path), 'utf8').trim().split('\n')).toHaveLength(3);
  });

  it('opens without reading archived records: a damaged record is noticed only when it is read', () => {
    const path = indexPath();
    seed(path, [run(1, 'settled'), run(2, 'settled'), run(3, 'settled')]);
    new RunIndex(path).close();
    const archive = archiveOf(path);
    const text = readFileSync(archive, 'utf8');
    writeFileSync(archive, text.replace('"runId":"run-0002"', '"runId"?"run-0002"')); // same length
    const index = new RunIndex(path);
    expect(index.archive.unreadable).toBe(0);
    expect(index.archive.count).toBe(3);
    expect(index.get('run-0003')?.state).toBe('settled');
    expect(index.archive.unreadable).toBe(0);
    expect(ids(index.newestFirst())).toEqual(['run-0003', 'run-0001']);
    expect(index.archive.unreadable).toBe(1);
    index.close();
  });

  it('a run changed after archiving reads back once, with its newest record, before and after reopening', () => {
    const path = indexPath();
    seed(path, [run(1, 'settled'), run(2, 'settled')]);
    const index = new RunIndex(path);
    index.put({ ...index.get('run-0001')!, state: 'disposed' });
    expect(index.get('run-0001')?.state).toBe('disposed');
    expect(ids(index.newestFirst()).sort()).toEqual(['run-0001', 'run-0002']);
    index.close();
    const reopened = new RunIndex(path);
    expect(reopened.archive.count).toBe(3); // the older line stays until retention rewrites
    expect(reopened.get('run-0001')?.state).toBe('disposed');
    expect([...reopened.newestFirst()].map((r) => `${r.runId}:${r.state}`)).toEqual(['run-0001:disposed', 'run-0002:settled']);
    reopened.close();
  });

  it('repairs a crash between the two files: records without index entries, a torn record, a lost sidecar', () => {
    const path = indexPath();
    seed(path, [run(1, 'settled'), run(2, 'settled')]);
    new RunIndex(path).close();
    const archive = archiveOf(path);
    const sidecar = archive.replace('.jsonl', '.idx');
    // Records appended without their index entries, then a torn one.
    appendFileSync(archive, `${JSON.stringify(run(3, 'settled'))}\n{"runId":"run-00`);
    let index = new RunIndex(path);
    expect(ids(index.newestFirst())).toEqual(['run-0003', 'run-0002', 'run-0001']);
    expect(readFileSync(archive, 'utf8').endsWith('}\n')).toBe(true);
    expect(statSync(sidecar).size).toBe(3 * 12);
    index.close();
    // A torn index entry is cut; a lost sidecar is rebuilt from the records.
    truncateSync(sidecar, 3 * 12 - 5);
    index = new RunIndex(path);
    expect(ids(index.newestFirst())).toEqual(['run-0003', 'run-0002', 'run-0001']);
    index.close();
    rmSync(sidecar);
    index = new RunIndex(path);
    expect(index.get('run-0001')?.state).toBe('settled');
    expect(index.archive.count).toBe(3);
    index.close();
  });
});

describe('retention', () => {
  it('removes archived runs past the count, oldest first, and never a run held in memory', () => {
    const path = indexPath();
    seed(path, [...Array.from({ length: 10 }, (_, i) => run(i, 'disposed')), run(10, 'running')]);
    const index = new RunIndex(path);
    expect(pruneRuns(index, { maxAgeDays: 30, maxCount: 4 })).toBe(6);
    expect(ids(index.newestFirst())).toEqual(['run-0010', 'run-0009', 'run-0008', 'run-0007', 'run-0006']);
    expect(pruneRuns(index, { maxAgeDays: 30, maxCount: 4 })).toBe(0);
    index.close();
    const reopened = new RunIndex(path);
    expect(reopened.archive.count).toBe(4);
    expect(reopened.get('run-0006')?.state).toBe('disposed');
    expect(reopened.get('run-0005')).toBeUndefined();
    reopened.close();
  });

  it('removes archived runs settled longer ago than the age limit', () => {
    const path = indexPath();
    seed(path, [run(1, 'settled', 40), run(2, 'settled', 31), run(3, 'settled', 2), run(4, 'disposed', 0)]);
    const index = new RunIndex(path);
    expect(pruneRuns(index, { maxAgeDays: 30, maxCount: 100 })).toBe(2);
    expect(ids(index.newestFirst())).toEqual(['run-0004', 'run-0003']);
    index.close();
  });

  it('session logs: by age, then the least recently written past the count, sparing live ones', () => {
    const parent = makeTempDir('subagentd-sessions-');
    dirs.push(parent);
    const dir = join(parent, 'sessions');
    dirs.push(dir);
    mkdirSync(dir);
    const now = Date.now();
    const names = ['ancient', 'a', 'b', 'live', 'c', 'd'];
    names.forEach((name, i) => {
      const file = join(dir, `${name}.jsonl`);
      writeFileSync(file, '{}\n');
      const when = (name === 'ancient' ? now - 30 * day : now - (names.length - i) * 60_000) / 1000;
      utimesSync(file, when, when);
    });
    const silent = pino({ level: 'silent' });
    expect(pruneSessions(dir, 14 * day, silent, now, 2, (id) => id === 'live')).toBe(3);
    expect(names.filter((name) => existsSync(join(dir, `${name}.jsonl`)))).toEqual(['live', 'c', 'd']);
  });
});

describe('a long-lived daemon', () => {
  it('archives finished runs once more than maxHeld are in memory, keeping the live ones', async () => {
    const path = indexPath();
    const index = new RunIndex(path, undefined, undefined, 4);
    index.put(run(0, 'running'));
    for (let n = 1; n <= 4; n++) index.put(run(n, 'disposed'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(ids(index.all())).toEqual(['run-0000']);
    expect(index.archive.count).toBe(4);
    expect(ids(index.newestFirst())).toEqual(['run-0000', 'run-0004', 'run-0003', 'run-0002', 'run-0001']);
    index.put({ ...index.get('run-0002')!, state: 'settled' });
    expect(index.get('run-0002')?.state).toBe('settled');
    index.close();
    expect(readFileSync(path, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as IndexedRun).runId)).toEqual(['run-0000', 'run-0002']);
  });

  it('archives finished runs once their records pass maxHeldBytes, however few, and reads large ones back whole', async () => {
    const path = indexPath();
    const index = new RunIndex(path, undefined, undefined, 10_000, 1_500_000);
    const settled = (n: number): IndexedRun => ({
      ...run(n, 'settled'),
      result: { output: [{ type: 'text', text: `${n}:`.padEnd(200_000, 'x') }], stopReason: 'completed' },
    });
    const turn = (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve));
    index.put(run(0, 'running'));
    for (let n = 1; n <= 7; n++) index.put(settled(n)); // ≈ 1.4 MB of records: under the bound
    await turn();
    expect(index.all()).toHaveLength(8);
    expect(index.archive.count).toBe(0);
    index.put(settled(8)); // ≈ 1.6 MB: past it
    await turn();
    expect(ids(index.all())).toEqual(['run-0000']);
    expect(index.archive.count).toBe(8);
    // The archive's write is chunked (about 1 MiB a write): every record reads back at its offset.
    for (let n = 1; n <= 8; n++) {
      const text = (index.get(`run-${String(n).padStart(4, '0')}`)?.result?.output[0] as { text: string } | undefined)?.text;
      expect(text?.length).toBe(200_000);
      expect(text?.startsWith(`${n}:x`)).toBe(true);
    }
    index.put({ ...run(0, 'running'), revision: 2 });
    await turn();
    expect(index.archive.count).toBe(8); // nothing finished held: no pass
    index.close();
  });
});
