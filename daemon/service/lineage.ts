/**
 * Who may do what to a continuable child, from the lineage in its durable records. The rules:
 * only the child's direct parent sends it messages; its parent or any ancestor may interrupt it;
 * a child cannot act on itself, and anyone else — a sibling, an unrelated agent, or another
 * client (a different owner key) — gets NOT_OWNER. Listing walks the same parent links.
 */
import { SubagentError, type ChildEntry } from '../../protocol/index.js';
import type { ChildRecord } from '../store/child-index.js';

export interface LineageView {
  get(childId: string): ChildRecord | undefined;
  all(): ChildRecord[];
}

function refuse(childId: string, why: string): SubagentError {
  return new SubagentError('NOT_OWNER', `child ${childId}: ${why}`, { field: '/childId' });
}

/** `from` may message `record` only as its direct parent, holding the lineage's owner key. */
export function checkSender(record: ChildRecord, ownerHash: string, from: string): void {
  if (record.ownerHash !== ownerHash) throw refuse(record.childId, 'it belongs to another client');
  if (from === record.childId) throw refuse(record.childId, 'a child cannot message itself');
  if (from !== record.parentId) throw refuse(record.childId, 'only its direct parent may send it messages');
}

/** `by` may interrupt `record` as its parent or an ancestor, holding the lineage's owner key. */
export function checkInterrupter(view: LineageView, record: ChildRecord, ownerHash: string, by: string): void {
  if (record.ownerHash !== ownerHash) throw refuse(record.childId, 'it belongs to another client');
  if (by === record.childId) throw refuse(record.childId, 'a child cannot interrupt itself');
  if (!ancestorsOf(view, record).includes(by)) throw refuse(record.childId, 'only its parent or an ancestor may interrupt it');
}

/** The parent chain of a child, nearest first; a cycle in damaged records ends the walk. */
export function ancestorsOf(view: LineageView, record: ChildRecord): string[] {
  const chain: string[] = [];
  let parentId: string | undefined = record.parentId;
  while (parentId !== undefined && !chain.includes(parentId)) {
    chain.push(parentId);
    parentId = view.get(parentId)?.parentId;
  }
  return chain;
}

/**
 * Children of `of` (scope `children`) or all its descendants in pre-order (each child followed by
 * its own subtree, so an indented listing nests right), with parent and depth.
 */
export function listLineage(view: LineageView, ownerHash: string, of: string, scope: 'children' | 'descendants'): ChildEntry[] {
  const byParent = new Map<string, ChildRecord[]>();
  for (const record of view.all()) {
    if (record.ownerHash !== ownerHash) continue;
    const siblings = byParent.get(record.parentId) ?? [];
    siblings.push(record);
    byParent.set(record.parentId, siblings);
  }
  const entries: ChildEntry[] = [];
  const seen = new Set<string>([of]);
  // An explicit stack (a long chain of damaged records must not overflow the call stack); the
  // siblings go on it in reverse so they come off in their recorded order.
  const stack: Array<{ record: ChildRecord; depth: number }> = [];
  const pushChildren = (parentId: string, depth: number): void => {
    const children = byParent.get(parentId) ?? [];
    for (let i = children.length - 1; i >= 0; i -= 1) stack.push({ record: children[i]!, depth });
  };
  pushChildren(of, 1);
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { record: child, depth } = next;
    if (seen.has(child.childId)) continue;
    seen.add(child.childId);
    entries.push({
      id: child.childId,
      status: child.status,
      ...(child.label !== undefined && { label: child.label }),
      hasChildren: (byParent.get(child.childId)?.length ?? 0) > 0,
      ...(scope === 'descendants' && { parentId: child.parentId, depth }),
    });
    if (scope === 'descendants') pushChildren(child.childId, depth + 1);
  }
  return entries;
}
