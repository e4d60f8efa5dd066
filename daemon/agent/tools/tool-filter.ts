/**
 * A start request's tool filter, checked against the names the child could have. A filtered tool
 * is hidden from the model and refused if called anyway (one visibility); an unknown name is a
 * request error rather than a silent no-op.
 */
import type { ToolFilter } from '../../../protocol/index.js';

export class UnknownToolNameError extends Error {
  override readonly name = 'UnknownToolNameError';
  constructor(readonly toolName: string, known: readonly string[]) {
    super(`toolFilter names unknown tool "${toolName}" (known: ${known.join(', ') || 'none'})`);
  }
}

/** Returns the visibility predicate for `filter`; throws UnknownToolNameError for an unknown name. */
export function compileToolFilter(filter: ToolFilter | undefined, known: readonly string[]): (name: string) => boolean {
  if (filter === undefined) return () => true;
  const listed = 'allow' in filter ? filter.allow : filter.deny;
  for (const name of listed) {
    if (!known.includes(name)) throw new UnknownToolNameError(name, known);
  }
  const names = new Set(listed);
  return 'allow' in filter ? (name) => names.has(name) : (name) => !names.has(name);
}
