/**
 * The parent agent lives in this process; the daemon gets a reference to it. Depth values are
 * copied exactly as found, including malformed ones: the daemon rejects those with
 * INVALID_REQUEST, whereas coercing to 0 would silently disable a depth cap.
 */
import { SubagentError, type ParentRef, type SessionEvent } from '../protocol/index.js';
import { harnessLogToSeed, isHarnessLog } from './harness-log.js';
import type { HarnessAgentLike, ParentInput } from './types.js';

export interface NormaliseOptions {
  /** Attach the parent's completed turns (only providers that inherit context need them). */
  readonly includeEvents: boolean;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export function toParentRef(parent: ParentInput, options: NormaliseOptions): ParentRef {
  if (isHarnessAgent(parent)) return fromHarnessAgent(parent, options);
  if (isPlainRef(parent)) return fromPlainRef(parent, options);
  throw new SubagentError(
    'INVALID_REQUEST',
    '/parent must be a harness agent (session.id, session.header.cwd) or a reference ({ sessionId, cwd })',
    { field: '/parent' },
  );
}

function fromHarnessAgent(agent: HarnessAgentLike, options: NormaliseOptions): ParentRef {
  const { session } = agent;
  const header: unknown = session.header;
  if (typeof session.id !== 'string' || typeof header !== 'object' || header === null) {
    throw new SubagentError('INVALID_REQUEST', '/parent/session must have an id and a header', { field: '/parent/session' });
  }
  const cwd = (header as { cwd?: unknown }).cwd;
  if (typeof cwd !== 'string') {
    throw new SubagentError('INVALID_REQUEST', '/parent/session/header/cwd must be a string', {
      field: '/parent/session/header/cwd',
    });
  }
  const ref: Mutable<ParentRef> = { sessionId: session.id, cwd };
  copyPresent(ref, 'delegationDepth', header, 'delegationDepth');
  if (typeof agent.options === 'object' && agent.options !== null) {
    copyPresent(ref, 'subagentDepth', agent.options, 'subagentDepth');
  }
  if (options.includeEvents) {
    const log = session.events ?? session.log;
    if (log !== undefined) ref.events = seedFromAgentLog(Array.from(log));
  }
  return ref;
}

function fromPlainRef(parent: ParentRef, options: NormaliseOptions): ParentRef {
  const ref: Mutable<ParentRef> = { sessionId: parent.sessionId, cwd: parent.cwd };
  copyPresent(ref, 'delegationDepth', parent, 'delegationDepth');
  copyPresent(ref, 'subagentDepth', parent, 'subagentDepth');
  if (options.includeEvents && parent.events !== undefined) ref.events = completedTurnPrefix(parent.events);
  return ref;
}

/**
 * A harness agent's log is translated (see harness-log.ts); a log already in the seam's shape is
 * cut as it is, and the daemon validates it.
 */
function seedFromAgentLog(log: unknown[]): SessionEvent[] {
  return isHarnessLog(log) ? harnessLogToSeed(log) : completedTurnPrefix(log as SessionEvent[]);
}

/**
 * The parent's events up to and including its last `turn/end`: the in-flight turn (which holds
 * the pending delegation call) is left out so the child's seed is balanced. No completed turn → [].
 */
export function completedTurnPrefix(events: Iterable<SessionEvent>): SessionEvent[] {
  const all = Array.from(events);
  for (let index = all.length - 1; index >= 0; index--) {
    if (all[index]?.type === 'turn/end') return all.slice(0, index + 1);
  }
  return [];
}

/** Copy a field that is present (even if malformed); skip one that is absent or `undefined`. */
function copyPresent<K extends 'delegationDepth' | 'subagentDepth'>(
  target: Mutable<ParentRef>,
  key: K,
  source: object,
  sourceKey: string,
): void {
  const value: unknown = (source as Record<string, unknown>)[sourceKey];
  // Deliberately unchecked: the daemon owns depth validation (a non-number fails there, loudly).
  if (value !== undefined) target[key] = value as number;
}

function isHarnessAgent(value: unknown): value is HarnessAgentLike {
  if (typeof value !== 'object' || value === null) return false;
  const session: unknown = (value as { session?: unknown }).session;
  return typeof session === 'object' && session !== null;
}

function isPlainRef(value: unknown): value is ParentRef {
  if (typeof value !== 'object' || value === null) return false;
  const { sessionId, cwd } = value as { sessionId?: unknown; cwd?: unknown };
  return typeof sessionId === 'string' && typeof cwd === 'string';
}
