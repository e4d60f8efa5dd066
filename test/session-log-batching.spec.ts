/**
 * The session log writes each event-loop turn's appends as one write, in order, and `flush()`
 * writes what is still waiting: a flushed log holds every appended line. It fsyncs what it wrote,
 * once: a close right after a flush (every turn's end) does not sync again, and creating a log
 * does not sync at all (its first flush does).
 */
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SessionLog } from '../daemon/store/session-log.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const header = { id: 's1', parentSession: 'p', cwd: '/work', delegationDepth: 1, provider: 'spawn', model: 'm', createdAt: '2026-01-01T00:00:00.000Z' };
const text = (t: string) => ({ type: 'user/message' as const, content: [{ type: 'text' as const, text: t }] });
const texts = (file: string): string[] =>
  file
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => (JSON.parse(line) as { content: Array<{ text: string }> }).content[0]!.text);

/** Counts FileHandle writes, or syncs (the class is not exported: take its prototype from a handle). */
async function countWrites(dir: string, method: 'write' | 'sync' = 'write'): Promise<{ calls: () => number }> {
  const probe = await open(join(dir, 'probe'), 'w');
  const spy = vi.spyOn(Object.getPrototypeOf(probe) as Record<typeof method, (...args: unknown[]) => unknown>, method);
  await probe.close();
  return { calls: () => spy.mock.calls.length };
}

afterEach(() => vi.restoreAllMocks());

describe('SessionLog batching', () => {
  it("writes one turn's appends in one write, and the next turn's in another", async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header);
    const writes = await countWrites(dir);
    for (const t of ['a', 'b', 'c']) log.append(text(t));
    await log.flush();
    expect(writes.calls()).toBe(1);
    expect(texts(await readFile(log.path, 'utf8'))).toEqual(['a', 'b', 'c']);

    log.append(text('d'));
    await new Promise((resolve) => setImmediate(resolve)); // the turn ends: its batch is handed over
    log.append(text('e'));
    await log.close();
    expect(writes.calls()).toBe(3);
    expect(texts(await readFile(log.path, 'utf8'))).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('creates without an fsync (a child start waits on no disk flush); the first flush syncs the header with the turn', async () => {
    const dir = await tempDir();
    const syncs = await countWrites(dir, 'sync');
    const log = await SessionLog.create(dir, header);
    expect(syncs.calls()).toBe(0);
    await log.flush(); // a turn that appended nothing still syncs what create wrote
    expect(syncs.calls()).toBe(1);
    await log.close();
    expect(syncs.calls()).toBe(1);
    expect(JSON.parse((await readFile(log.path, 'utf8')).trim())).toMatchObject({ id: 's1' });
  });

  it('fsyncs only what was written since the last sync: a close after a flush does not sync again', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header);
    const syncs = await countWrites(dir, 'sync');
    log.append(text('a'));
    await log.flush();
    expect(syncs.calls()).toBe(1);
    await log.flush(); // nothing new
    await log.close();
    expect(syncs.calls()).toBe(1);
    log.append(text('b')); // reopens
    await log.close();
    expect(syncs.calls()).toBe(2);
    expect(texts(await readFile(log.path, 'utf8'))).toEqual(['a', 'b']);
  });
});
