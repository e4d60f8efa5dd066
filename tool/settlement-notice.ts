/**
 * The one message a parent gets when a background (continuable) child settles. Its wording is
 * composed where the child settles (the service's `ChildSettledNotice.text`: "<label> finished |
 * was stopped before it finished | ran out of room | declined | failed…", then the closing message or "It left no
 * closing message."); the tool only carries it into the parent's next turn, unchanged.
 */
import type { ChildSettledNotice, ContentBlock } from '../protocol/index.js';

export function settlementMessage(notice: ChildSettledNotice): ContentBlock[] {
  return [{ type: 'text', text: notice.text }];
}
