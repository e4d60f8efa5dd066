import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent, SessionHeader } from '../protocol/index.js';
import { SessionLog } from '../daemon/store/session-log.js';
import { sessionFilePath } from '../daemon/ops/paths.js';
import { readSessionFile, SessionFileError } from '../daemon/store/session-reader.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

function header(id: string, cwd = '/work'): SessionHeader {
  return { id, parentSession: 'parent', cwd, delegationDepth: 2, provider: 'spawn', model: 'm', createdAt: '2026-01-01T00:00:00.000Z' };
}

const seed: SessionEvent[] = [
  { type: 'user/message', content: [{ type: 'text', text: 'parent asks' }], at: '2025-12-31T00:00:00.000Z' },
  { type: 'assistant/message', content: [{ type: 'text', text: 'parent answers' }] },
  { type: 'turn/end', reason: 'completed' },
];

describe('SessionLog', () => {
  it('writes the header and seed at creation, then one stamped line per appended event', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header('s1'), seed);
    const afterCreate = (await readFile(sessionFilePath(dir, 's1'), 'utf8')).trimEnd().split('\n');
    expect(JSON.parse(afterCreate[0] as string)).toEqual(header('s1'));
    expect(afterCreate).toHaveLength(4);
    // A seed event keeps its own time; one without gets stamped.
    expect(JSON.parse(afterCreate[1] as string).at).toBe('2025-12-31T00:00:00.000Z');
    expect(typeof JSON.parse(afterCreate[2] as string).at).toBe('string');

    const stored = log.append({ type: 'user/message', content: [{ type: 'text', text: 'child task' }] });
    expect(Date.parse(stored.at ?? '')).not.toBeNaN();
    await log.flush();
    const lines = (await readFile(log.path, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines.slice(1).map((line) => JSON.parse(line))).toEqual(log.events);
    await log.close();
  });

  it('reopens its file for appends after close, and never overwrites an existing session', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header('s2'));
    await log.close();
    log.append({ type: 'turn/end', reason: 'completed' });
    await log.close();
    const loaded = await readSessionFile(log.path);
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/end']);
    await expect(SessionLog.create(dir, header('s2'))).rejects.toThrow(/EEXIST/);
  });

  it('discard removes the file of a child that was never published', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header('s3'));
    await log.discard();
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('readSessionFile', () => {
  it('loads what SessionLog wrote', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header('r1'), seed);
    log.append({ type: 'usage', usage: { promptTokens: 1, completionTokens: 2, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 } });
    await log.close();
    const loaded = await readSessionFile(log.path);
    expect(loaded.header).toEqual(header('r1'));
    expect(loaded.events).toEqual(log.events);
    expect(loaded.tornLine).toBeUndefined();
  });

  it('tolerates and reports a torn last line', async () => {
    const dir = await tempDir();
    const log = await SessionLog.create(dir, header('r2'), seed);
    await log.close();
    await appendFile(log.path, '{"type":"assistant/mess');
    const loaded = await readSessionFile(log.path);
    expect(loaded.tornLine).toBe(5);
    expect(loaded.events).toHaveLength(3);
  });

  it('rejects a corrupt line that is not the last, naming file and line', async () => {
    const dir = await tempDir();
    const file = join(dir, 'bad.jsonl');
    const lines = [JSON.stringify(header('r3')), JSON.stringify(seed[0]), '{not json', JSON.stringify(seed[2])];
    await writeFile(file, `${lines.join('\n')}\n`);
    const error = await readSessionFile(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionFileError);
    expect((error as SessionFileError).line).toBe(3);
    expect((error as Error).message).toContain(`${file}:3:`);
  });

  it('rejects a complete last line that is corrupt (only a line without its newline is torn)', async () => {
    const dir = await tempDir();
    const file = join(dir, 'bad.jsonl');
    await writeFile(file, `${JSON.stringify(header('r4'))}\n{"type":"user/mes\n`);
    await expect(readSessionFile(file)).rejects.toThrow(`${file}:2:`);
  });

  it('rejects valid JSON that is not a session event, and a file without a header', async () => {
    const dir = await tempDir();
    const file = join(dir, 'bad.jsonl');
    await writeFile(file, `${JSON.stringify(header('r5'))}\n{"type":"turn/end","reason":"nope"}\n`);
    await expect(readSessionFile(file)).rejects.toThrow(/bad\.jsonl:2: not a session event/);
    await writeFile(file, '');
    await expect(readSessionFile(file)).rejects.toThrow(/bad\.jsonl:1:/);
    await writeFile(file, `${JSON.stringify({ id: 'x' })}\n`);
    await expect(readSessionFile(file)).rejects.toThrow(/bad\.jsonl:1: not a session header/);
  });
});
