/**
 * The authority rules of continuable children (lineage.ts) over a real durable record file
 * (child-index.ts): who may send, who may interrupt, what listing shows, and how unreadable or
 * interrupted records come back.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import { ChildIndex, type ChildRecord } from '../daemon/store/child-index.js';
import { checkInterrupter, checkSender, listLineage } from '../daemon/service/lineage.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

const record = (childId: string, parentId: string, ownerHash = 'owner-a', status: ChildRecord['status'] = 'idle'): ChildRecord => ({
  childId,
  ownerHash,
  parentId,
  provider: 'spawn',
  label: `label-${childId}`,
  runId: `run_${childId}`,
  runToken: 'tok',
  status,
  inbox: [],
  undelivered: [],
  createdAt: '2026-01-01T00:00:00.000Z',
});

function code(action: () => void): string | undefined {
  try {
    action();
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(SubagentError);
    return (error as SubagentError).code;
  }
}

/** root ─ a ─ a1 ─ a1x ; root ─ b ; another owner's c under root */
async function tree(): Promise<ChildIndex> {
  const index = new ChildIndex(join(await tempDir(), 'children.jsonl'));
  for (const r of [record('a', 'root'), record('a1', 'a', 'owner-a', 'running'), record('a1x', 'a1'), record('b', 'root'), record('c', 'root', 'owner-b')]) index.put(r);
  return index;
}

it('only the direct parent, with the lineage\'s key, may send', async () => {
  const index = await tree();
  const a1 = index.get('a1')!;
  expect(code(() => checkSender(a1, 'owner-a', 'a'))).toBeUndefined();
  expect(code(() => checkSender(a1, 'owner-a', 'root'))).toBe('NOT_OWNER'); // an ancestor, not the parent
  expect(code(() => checkSender(a1, 'owner-a', 'b'))).toBe('NOT_OWNER'); // unrelated
  expect(code(() => checkSender(a1, 'owner-a', 'a1'))).toBe('NOT_OWNER'); // itself
  expect(code(() => checkSender(a1, 'owner-b', 'a'))).toBe('NOT_OWNER'); // another client
});

it('the parent or any ancestor may interrupt; self, sibling, descendant and other clients may not', async () => {
  const index = await tree();
  const a1x = index.get('a1x')!;
  for (const by of ['a1', 'a', 'root']) expect(code(() => checkInterrupter(index, a1x, 'owner-a', by))).toBeUndefined();
  expect(code(() => checkInterrupter(index, a1x, 'owner-a', 'a1x'))).toBe('NOT_OWNER');
  expect(code(() => checkInterrupter(index, a1x, 'owner-a', 'b'))).toBe('NOT_OWNER');
  expect(code(() => checkInterrupter(index, index.get('a')!, 'owner-a', 'a1'))).toBe('NOT_OWNER');
  expect(code(() => checkInterrupter(index, a1x, 'owner-b', 'root'))).toBe('NOT_OWNER');
});

it('lists children or descendants of one owner, in pre-order, with parent, depth and hasChildren', async () => {
  const index = await tree();
  expect(listLineage(index, 'owner-a', 'root', 'children')).toEqual([
    { id: 'a', status: 'idle', label: 'label-a', hasChildren: true },
    { id: 'b', status: 'idle', label: 'label-b', hasChildren: false },
  ]);
  expect(listLineage(index, 'owner-a', 'root', 'descendants').map((e) => [e.id, e.parentId, e.depth, e.status])).toEqual([
    ['a', 'root', 1, 'idle'],
    ['a1', 'a', 2, 'running'],
    ['a1x', 'a1', 3, 'idle'],
    ['b', 'root', 1, 'idle'],
  ]);
  expect(listLineage(index, 'owner-b', 'root', 'descendants').map((e) => e.id)).toEqual(['c']);
});

it('reopening the record: last line wins, running reads as idle, unreadable lines become diagnostics', async () => {
  const path = join(await tempDir(), 'children.jsonl');
  const first = new ChildIndex(path);
  first.put(record('a', 'root', 'owner-a', 'running'));
  first.update('a', { inbox: [{ messageId: 'msg_1', content: [{ type: 'text', text: 'next' }] }] });
  first.close();
  writeFileSync(path, `${readFileSync(path, 'utf8')}{"not":"a child"}\n{torn`);
  const again = new ChildIndex(path);
  expect(again.get('a')).toMatchObject({ status: 'idle', inbox: [{ messageId: 'msg_1' }] });
  expect(again.unreadable).toHaveLength(2);
  expect(again.unreadable[0]).toMatch(/line 3: unreadable child record \(not a child record\)/);
  again.close();
});
