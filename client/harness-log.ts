/**
 * A deepseek-harness agent's session log, read as the seam's fork seed.
 *
 * A real harness log holds far more than a seed needs (`agent/inbox/spliced`, `turn/start`,
 * `step/*`, `request/*`, `assistant/chunk`, `tool/call`, …), each wrapped as
 * `{ type, seq, time, data }`. The seed keeps only what the child's model must see:
 * - `user/message {data: message}` → `user/message`;
 * - `assistant/message {data: {message}}` → `assistant/message`, its `tool-call` blocks folded
 *   into `toolCalls` and `reasoning` blocks into `reasoning`;
 * - `tool/result {data: {message}}` → one `tool/result` per `tool-result` block, named after
 *   the call it answers;
 * - `turn/end {data: {reason: {kind}}}` → `turn/end`.
 * Everything else is dropped, and the log is cut after its last `turn/end` (the in-flight turn
 * holds the pending delegation). Nothing is guessed: a kept event whose shape is not understood
 * is an INVALID_REQUEST naming its index, raised before anything starts.
 */
import { SubagentError, type ContentBlock, type SessionEvent, type ToolCall, type TurnEndReason } from '../protocol/index.js';

/** Whether a log is in the harness's wrapped form (as opposed to seam-shaped seed events). */
export function isHarnessLog(events: readonly unknown[]): boolean {
  const first = events[0];
  return typeof first === 'object' && first !== null && 'data' in first && 'seq' in first;
}

const TURN_END_REASONS: ReadonlySet<string> = new Set<TurnEndReason>([
  'completed', 'max-tokens', 'aborted', 'blocked', 'error', 'max-steps', 'interrupted',
]);

export function harnessLogToSeed(events: readonly unknown[], field = '/parent/session/events'): SessionEvent[] {
  let lastTurnEnd = events.length - 1;
  while (lastTurnEnd >= 0 && typeOf(events[lastTurnEnd]) !== 'turn/end') lastTurnEnd--;
  const seed: SessionEvent[] = [];
  const toolNames = new Map<string, string>();
  for (let index = 0; index <= lastTurnEnd; index++) {
    const reader = new EventReader(events[index], `${field}/${index}`);
    switch (reader.type) {
      case 'user/message':
        seed.push({ type: 'user/message', content: reader.textOrImages(reader.message('data')) });
        break;
      case 'assistant/message':
        seed.push(reader.assistant(toolNames));
        break;
      case 'tool/result':
        seed.push(...reader.toolResults(toolNames));
        break;
      case 'turn/end':
        seed.push({ type: 'turn/end', reason: reader.turnEndReason() });
        break;
      default:
        break; // bookkeeping the child's model never sees
    }
  }
  return seed;
}

function typeOf(event: unknown): unknown {
  return typeof event === 'object' && event !== null ? (event as { type?: unknown }).type : undefined;
}

type Json = Record<string, unknown>;

/** Reads one harness event, failing with the event's pointer on anything it does not understand. */
class EventReader {
  readonly type: unknown;
  private readonly data: Json;

  constructor(event: unknown, private readonly pointer: string) {
    if (!isObject(event)) this.fail('', 'must be an object');
    this.type = event.type;
    if (typeof this.type !== 'string') this.fail('/type', 'must be a string');
    this.data = isObject(event.data) ? event.data : {};
  }

  /** `user/message` carries the message as `data`; the others wrap it as `data.message`. */
  message(where: 'data' | 'data/message'): { content: unknown[]; at: string } {
    const message = where === 'data' ? this.data : this.data.message;
    const at = where === 'data' ? '/data' : '/data/message';
    if (!isObject(message) || !Array.isArray(message.content)) this.fail(`${at}/content`, 'must be an array of content blocks');
    return { content: message.content, at: `${at}/content` };
  }

  textOrImages({ content, at }: { content: unknown[]; at: string }): ContentBlock[] {
    return content.map((block, index) => this.plainBlock(block, `${at}/${index}`));
  }

  assistant(toolNames: Map<string, string>): SessionEvent {
    const { content, at } = this.message('data/message');
    const text: ContentBlock[] = [];
    const toolCalls: ToolCall[] = [];
    const reasoning: string[] = [];
    content.forEach((block, index) => {
      const where = `${at}/${index}`;
      if (!isObject(block)) this.fail(where, 'must be an object');
      if (block.type === 'tool-call') {
        const { id, name, arguments: args } = block;
        if (typeof id !== 'string' || typeof name !== 'string' || typeof args !== 'string') {
          this.fail(where, 'a tool-call needs string id, name and arguments');
        }
        toolNames.set(id, name);
        toolCalls.push({ id, name, arguments: args });
      } else if (block.type === 'reasoning') {
        if (typeof block.text !== 'string') this.fail(`${where}/text`, 'must be a string');
        reasoning.push(block.text);
      } else {
        text.push(this.plainBlock(block, where));
      }
    });
    return {
      type: 'assistant/message',
      content: text,
      ...(reasoning.length > 0 ? { reasoning: reasoning.join('') } : {}),
      ...(toolCalls.length > 0 ? { toolCalls } : {}),
    };
  }

  toolResults(toolNames: Map<string, string>): SessionEvent[] {
    const { content, at } = this.message('data/message');
    return content.map((block, index) => {
      const where = `${at}/${index}`;
      if (!isObject(block) || block.type !== 'tool-result') this.fail(where, 'must be a tool-result block');
      const callId = block.toolCallId;
      if (typeof callId !== 'string') this.fail(`${where}/toolCallId`, 'must be a string');
      const name = toolNames.get(callId);
      if (name === undefined) this.fail(`${where}/toolCallId`, `answers no earlier tool call (${callId})`);
      if (!Array.isArray(block.content)) this.fail(`${where}/content`, 'must be an array of content blocks');
      return {
        type: 'tool/result',
        callId,
        name,
        content: block.content.map((inner, innerIndex) => this.plainBlock(inner, `${where}/content/${innerIndex}`)),
        isError: block.isError === true,
      };
    });
  }

  turnEndReason(): TurnEndReason {
    const reason = this.data.reason;
    const kind = isObject(reason) ? reason.kind : undefined;
    if (typeof kind !== 'string' || !TURN_END_REASONS.has(kind)) {
      this.fail('/data/reason/kind', `must be one of ${[...TURN_END_REASONS].join(', ')}`);
    }
    return kind as TurnEndReason;
  }

  private plainBlock(block: unknown, where: string): ContentBlock {
    if (isObject(block) && block.type === 'text' && typeof block.text === 'string') return { type: 'text', text: block.text };
    if (isObject(block) && block.type === 'image' && typeof block.data === 'string' && typeof block.mimeType === 'string') {
      return { type: 'image', data: block.data, mimeType: block.mimeType };
    }
    return this.fail(where, 'must be a text or image block');
  }

  private fail(where: string, problem: string): never {
    const field = `${this.pointer}${where}`;
    throw new SubagentError('INVALID_REQUEST', `harness session event ${field} ${problem}; the fork seed cannot be built`, {
      field,
    });
  }
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
