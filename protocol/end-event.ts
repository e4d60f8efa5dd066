/**
 * The `subagent/end` event a settled run announces, built from its start identity and its result:
 * the output travels as `lastAssistantMessage` only when there is some, usage only when counted.
 * One home for the daemon's settle, the client's re-attach and the client's local providers.
 */
import type { SubagentEndEvent, SubagentResult, SubagentStartEvent } from './seam.js';

export function endEventOf(identity: SubagentStartEvent, result: SubagentResult): SubagentEndEvent {
  return {
    runId: identity.runId,
    provider: identity.provider,
    id: identity.id,
    local: identity.local,
    stopReason: result.stopReason,
    ...(result.output.length > 0 && { lastAssistantMessage: result.output }),
    ...(result.usage !== undefined && { usage: result.usage }),
  };
}
