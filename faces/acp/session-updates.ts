/**
 * How a child's activity reads in an ACP editor: live run events and a stored session log both
 * become `session/update`s, and a settled run's stop reason becomes the prompt's. Live text
 * arrives as deltas, so a live assistant message contributes only its tool calls; a replayed one
 * contributes its text too.
 */
import type * as acp from '@agentclientprotocol/sdk';
import type { RunEvent, SessionEvent, SubagentResult } from '../../protocol/index.js';
import { describeWait, isWaitEvent } from '../../common/progress-text.js';

const TOOL_KINDS: Record<string, acp.ToolKind> = {
  read_file: 'read',
  list_directory: 'read',
  search_text: 'search',
  write_file: 'edit',
  edit_file: 'edit',
  run_shell: 'execute',
};

const text = (value: string): acp.ContentBlock => ({ type: 'text', text: value });

function textOf(content: readonly { type: string; text?: string }[]): string {
  return content.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('');
}

/** The updates one session-log event stands for; `replay` includes the messages' text. */
export function updatesForEvent(event: SessionEvent, replay: boolean): acp.SessionUpdate[] {
  switch (event.type) {
    case 'user/message':
    case 'steering/message':
      return replay ? [{ sessionUpdate: 'user_message_chunk', content: text(textOf(event.content)) }] : [];
    case 'assistant/message': {
      const updates: acp.SessionUpdate[] = [];
      if (replay && event.reasoning) updates.push({ sessionUpdate: 'agent_thought_chunk', content: text(event.reasoning) });
      const said = textOf(event.content);
      if (replay && said) updates.push({ sessionUpdate: 'agent_message_chunk', content: text(said) });
      for (const call of event.toolCalls ?? []) {
        let rawInput: unknown = call.arguments;
        try {
          rawInput = JSON.parse(call.arguments);
        } catch {
          // Malformed arguments are shown as the model wrote them.
        }
        updates.push({
          sessionUpdate: 'tool_call',
          toolCallId: call.id,
          title: call.name,
          kind: TOOL_KINDS[call.name] ?? 'other',
          status: 'in_progress',
          rawInput,
        });
      }
      return updates;
    }
    case 'tool/result':
      return [
        {
          sessionUpdate: 'tool_call_update',
          toolCallId: event.callId,
          status: event.isError ? 'failed' : 'completed',
          content: [{ type: 'content', content: text(textOf(event.content)) }],
        },
      ];
    default:
      return [];
  }
}

export function updatesForRunEvent(event: RunEvent): acp.SessionUpdate[] {
  if (event.kind === 'text-delta') return [{ sessionUpdate: 'agent_message_chunk', content: text(event.text) }];
  if (event.kind === 'reasoning-delta') return [{ sessionUpdate: 'agent_thought_chunk', content: text(event.text) }];
  // ACP has no update kind for a model retry or wait, nor for the start's queue and agent stages: a
  // session info update carries it in `_meta` (with the one wording of common/progress-text.ts),
  // which any client may take or ignore.
  if (isWaitEvent(event)) {
    return [{ sessionUpdate: 'session_info_update', updatedAt: new Date().toISOString(), _meta: { subagentd: { ...event, message: describeWait(event) } } }];
  }
  return updatesForEvent(event.event, false);
}

const STOP_REASONS: Record<string, acp.StopReason> = {
  completed: 'end_turn',
  aborted: 'cancelled',
  'max-tokens': 'max_tokens',
  refusal: 'refusal',
};

/** The prompt's stop reason, or undefined when the run failed (the prompt then answers an error). */
export function stopReasonOf(result: SubagentResult): acp.StopReason | undefined {
  return STOP_REASONS[result.stopReason];
}

/** The editor's prompt as the seam's content: text and images; resources are named in text. */
export function promptContent(prompt: readonly acp.ContentBlock[]): Array<{ type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string }> {
  return prompt.map((block) => {
    switch (block.type) {
      case 'text':
        return { type: 'text', text: block.text };
      case 'image':
        return { type: 'image', data: block.data, mimeType: block.mimeType };
      case 'resource_link':
        return { type: 'text', text: `[resource: ${block.uri}]` };
      case 'resource':
        return { type: 'text', text: 'text' in block.resource ? `[resource ${block.resource.uri}]\n${block.resource.text}` : `[resource: ${block.resource.uri}]` };
      default:
        return { type: 'text', text: `[${block.type} content omitted]` };
    }
  });
}
