/**
 * A session log on a disk that fills up mid-run (faults injected by test/fixtures/disk-faults.mjs,
 * loaded into this test's worker): the failure surfaces as a SessionWriteError naming the file and
 * errno, and the file keeps only whole lines written before the fault.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SessionLog, SessionWriteError } from '../daemon/store/session-log.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const control = join(tmpdir(), `subagentd-disk-faults-${process.pid}.json`);
beforeAll(async () => {
  process.env['SUBAGENTD_TEST_DISK_FAULTS'] = control;
  // @ts-expect-error: a plain .mjs fixture without types
  await import('./fixtures/disk-faults.mjs');
});
afterEach(() => rm(control, { force: true }));

const header = { id: 's1', parentSession: 'p', cwd: '/work', delegationDepth: 1, provider: 'spawn', model: 'm', createdAt: '2026-01-01T00:00:00.000Z' };
const text = (t: string) => ({ type: 'user/message' as const, content: [{ type: 'text' as const, text: t }] });

describe('SessionLog on a failing disk', () => {
  it('names the file and errno at creation and leaves no file behind', async () => {
    const dir = await tempDir();
    await writeFile(control, JSON.stringify({ dir, code: 'ENOSPC' }));
    const created = SessionLog.create(dir, header);
    await expect(created).rejects.toBeInstanceOf(SessionWriteError);
    await expect(created).rejects.toThrow(`session log cannot write ${join(dir, 's1.jsonl')}: ENOSPC (no space left on device)`);
    await expect(readFile(join(dir, 's1.jsonl'))).rejects.toThrow('ENOENT');
  });

  it('a fault mid-run fails the next flush by path and errno; later appends never reach the file', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header);
    log.append(text('before'));
    await log.flush();
    const before = await readFile(log.path, 'utf8');
    await writeFile(control, JSON.stringify({ dir, code: 'ENOSPC' }));
    log.append(text('during'));
    await expect(log.flush()).rejects.toThrow(`cannot write ${log.path}: ENOSPC`);
    await rm(control);
    log.append(text('after'));
    await expect(log.close()).rejects.toBeInstanceOf(SessionWriteError);
    expect(await readFile(log.path, 'utf8')).toBe(before);
    expect(log.events).toHaveLength(3); // memory still holds the run's history
  });
});
