/** The on-disk state: the run index (torn and corrupt lines) and session retention. */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RunIndex, type IndexedRun } from '../daemon/store/run-index.js';
import { pruneSessions } from '../daemon/store/session-retention.js';
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
  daemonEpoch: 'e1',
  daemonPid: 1,
});

describe('RunIndex', () => {
  it('keeps the last line per run across reopenings; finished runs move to the archive', () => {
    const path = join(temp(), 'runs.jsonl');
    const index = new RunIndex(path);
    index.put(run('a'));
    index.update('a', { state: 'settled' });
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
