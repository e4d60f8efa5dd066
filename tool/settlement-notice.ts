/**
 * The one message a parent gets when a background (continuable) child settles. One home for its
 * wording, so the daemon composing `ChildSettledNotice.text` and the tool agree: the child's
 * name, what happened (finished / was stopped / ran out of room / declined / failed), then its
 * closing message or "It left no closing message."
 */
import type { ChildSettledNotice, ContentBlock, SubagentStopReason } from '../protocol/index.js';

const VERBS: Readonly<Record<string, string>> = {
  completed: 'finished',
  aborted: 'was stopped',
  'max-tokens': 'ran out of room',
  refusal: 'declined',
  error: 'failed',
};

export function settlementText(notice: {
  readonly childId: string;
  readonly label?: string;
  readonly stopReason: SubagentStopReason;
  readonly closingMessage?: string;
}): string {
  const who = notice.label === undefined ? `Subagent ${notice.childId}` : `Subagent ${notice.childId} (${notice.label})`;
  const what = VERBS[notice.stopReason] ?? `failed (${notice.stopReason})`;
  const closing = notice.closingMessage === undefined || notice.closingMessage.trim() === ''
    ? 'It left no closing message.'
    : `Its closing message:\n${notice.closingMessage}`;
  return `${who} ${what}. ${closing}`;
}

/** The notice as a message for the parent's next turn. */
export function settlementMessage(notice: ChildSettledNotice): ContentBlock[] {
  return [{ type: 'text', text: notice.text }];
}
