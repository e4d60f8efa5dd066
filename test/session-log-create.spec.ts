/**
 * Creating a session log: the sessions dir is made (0700) when it is missing, an existing dir is
 * used as it is, the file is 0600 and never overwritten (a second create of the same id fails
 * with SessionWriteError and leaves the first file whole).
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SessionLog, SessionWriteError } from '../daemon/store/session-log.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const header = (id: string) => ({ id, parentSession: 'p', cwd: '/work', delegationDepth: 1, provider: 'spawn', model: 'm', createdAt: '2026-01-01T00:00:00.000Z' });

describe('SessionLog.create', () => {
  it('makes a missing sessions dir (0700, parents too) and writes the header to a 0600 file', async () => {
    const dir = join(await tempDir(), 'state', 'sessions');
    const log = await SessionLog.create(dir, header('s1'));
    await log.close();
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    expect((await stat(log.path)).mode & 0o777).toBe(0o600);
    expect(JSON.parse((await readFile(log.path, 'utf8')).trim())).toMatchObject({ id: 's1' });
  });

  it('uses an existing dir for later children, and refuses to overwrite an existing session file', async () => {
    const dir = await tempDir();
    const first = await SessionLog.create(dir, header('s1'));
    first.append({ type: 'user/message', content: [{ type: 'text', text: 'kept' }] });
    await first.close();
    const second = await SessionLog.create(dir, header('s2'));
    await second.close();
    expect(second.path).toBe(join(dir, 's2.jsonl'));
    const error = await SessionLog.create(dir, header('s1')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionWriteError);
    expect((await readFile(first.path, 'utf8')).trim().split('\n')).toHaveLength(2);
  });
});
