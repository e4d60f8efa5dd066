/**
 * Where a continuable child's settlement notice waits for the MCP host's model. MCP has no
 * server → client chat message, and hosts do not show logging notifications to the model, so a
 * notice is held here and delivered with the next result this face returns (of any of its tools):
 * that is the face's "message before the parent's next turn". Each notice is delivered once, in
 * the order the daemon settled the children; only notices of this face's own parent are kept.
 */
import type { ChildSettledNotice, ContentBlock } from '../../protocol/index.js';

export class SettlementInbox {
  private unread: ContentBlock[] = [];

  constructor(private readonly parentId: string) {}

  /** A `child/settled` notice with the message the tool composed for it. */
  readonly deliver = (notice: ChildSettledNotice, message: ContentBlock[]): void => {
    if (notice.parentId !== undefined && notice.parentId !== this.parentId) return;
    this.unread.push(...message);
  };

  /** The unread notices, now read. */
  take(): ContentBlock[] {
    const taken = this.unread;
    this.unread = [];
    return taken;
  }
}
