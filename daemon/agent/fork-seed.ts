/**
 * A fork child's seed must be a balanced completed-turn prefix of the parent's log, or the child
 * would start mid-turn (a tool call with no result, a turn with no end). Checked at start.
 */
import type { SessionEvent } from '../../protocol/index.js';

/** Returns why `events` is not a balanced completed-turn prefix, or undefined when it is. */
export function seedProblem(events: readonly SessionEvent[]): string | undefined {
  if (events.length === 0) return undefined;
  if (events[0]?.type !== 'user/message') return `it must start with a user/message, not ${events[0]?.type}`;
  if (events.at(-1)?.type !== 'turn/end') return 'it must end with a turn/end (only completed turns can be forked)';
  const open = new Set<string>();
  for (const [index, event] of events.entries()) {
    if (event.type === 'assistant/message') {
      for (const call of event.toolCalls ?? []) open.add(call.id);
    } else if (event.type === 'tool/result') {
      open.delete(event.callId);
    } else if (event.type === 'turn/end' && open.size > 0) {
      return `the turn ending at event ${index} leaves tool call(s) ${[...open].join(', ')} without a tool/result`;
    }
  }
  return undefined;
}
