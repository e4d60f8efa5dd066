/**
 * Session events -> OpenAI chat-completions messages, kept in the form the adapter sends, and
 * their JSON text, both extended step by step as the log grows.
 */
import type { ContentBlock, SessionEvent } from '../../../protocol/index.js';
import { reasoningToSend } from './deepseek.js';

/** Sent in place of a tool result the log never recorded (e.g. a run interrupted mid-call). */
export const MISSING_TOOL_RESULT = 'No result was recorded for this tool call (it was interrupted).';

// ---------------------------------------------------------------------------------------------
// Session events -> chat messages

interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

type WireUserPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** The messages we send. `reasoning_content` is DeepSeek's extension, absent from the SDK types. */
export type WireMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | WireUserPart[] }
  | { role: 'assistant'; content: string; tool_calls?: WireToolCall[]; reasoning_content?: string }
  | { role: 'tool'; tool_call_id: string; content: string };

function joinText(blocks: readonly ContentBlock[]): string {
  return blocks
    .filter((b): b is Extract<ContentBlock, { type: 'text' }> => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
}

function userContent(blocks: readonly ContentBlock[]): string | WireUserPart[] {
  if (!blocks.some((b) => b.type === 'image')) return joinText(blocks);
  return blocks.map(
    (b): WireUserPart =>
      b.type === 'text'
        ? { type: 'text', text: b.text }
        : { type: 'image_url', image_url: { url: `data:${b.mimeType};base64,${b.data}` } },
  );
}

/** Tool messages carry text only on the chat API: images become a short placeholder. */
function toolContent(blocks: readonly ContentBlock[], isError: boolean): string {
  const text = blocks
    .map((b) => (b.type === 'text' ? b.text : `[image omitted: ${b.mimeType}]`))
    .join('\n');
  if (text !== '') return text;
  return isError ? '(the tool failed without output)' : '(no output)';
}

/**
 * The session log as chat messages for `model`, kept per child and extended as the log grows:
 * a step converts only the events appended since the last one (a 1000-step run no longer
 * rebuilds its whole history every step).
 *
 * Besides the one-to-one mapping, it keeps the request valid for strict servers: every assistant
 * tool call is answered by a `tool` message before the next user or assistant message. A user or
 * steering message logged while calls were outstanding is sent after their results; a call whose
 * result was never logged gets `MISSING_TOOL_RESULT` in the request (not in the kept history: the
 * result may still come); a result that answers no outstanding call is dropped (the API rejects
 * such a message).
 *
 * The JSON text of the settled messages is kept too and extended by the new ones only: a request
 * body serialized whole costs O(history) per step (the SDK's encoder, with its replacer, was a
 * quarter of an agent's CPU at step ~1000). Settled messages are never changed once pushed, so
 * their text stays theirs. The price: the text is held beside the messages (about the history's
 * size again, per live child of this adapter).
 */
class ChatHistory {
  /** Messages settled for good (never changed once pushed). */
  private readonly settled: WireMessage[] = [];
  /** `settled[0 .. jsonCount)` as JSON, comma-separated, without brackets. */
  private settledJson = '';
  private jsonCount = 0;
  /** Tool calls not answered yet, in order. */
  private readonly pending = new Set<string>();
  /** User messages logged while calls were outstanding: sent after their results. */
  private deferred: WireMessage[] = [];
  private consumed = 0;
  private lastSeen: SessionEvent | undefined;

  constructor(
    private readonly model: string,
    readonly system: string,
  ) {
    if (system !== '') this.settled.push({ role: 'system', content: system });
  }

  /** Whether `events` is this history's log, only appended to since the last call. */
  follows(events: readonly SessionEvent[], model: string, system: string): boolean {
    if (model !== this.model || system !== this.system || events.length < this.consumed) return false;
    return this.consumed === 0 || events[this.consumed - 1] === this.lastSeen;
  }

  messages(events: readonly SessionEvent[]): WireMessage[] {
    this.consume(events);
    const tail = this.tail();
    return tail.length === 0 ? this.settled.slice() : [...this.settled, ...tail];
  }

  /** `JSON.stringify(this.messages(events))`, serializing only what is new since the last call. */
  json(events: readonly SessionEvent[]): string {
    this.consume(events);
    for (; this.jsonCount < this.settled.length; this.jsonCount++) {
      this.settledJson += `${this.jsonCount === 0 ? '' : ','}${JSON.stringify(this.settled[this.jsonCount])}`;
    }
    const tail = this.tail();
    if (tail.length === 0) return `[${this.settledJson}]`;
    const tailJson = JSON.stringify(tail).slice(1, -1);
    return `[${this.settledJson}${this.settledJson === '' ? '' : ','}${tailJson}]`;
  }

  private consume(events: readonly SessionEvent[]): void {
    for (; this.consumed < events.length; this.consumed++) this.add(events[this.consumed]!);
    this.lastSeen = events[this.consumed - 1];
  }

  /** What goes after the settled messages in this request: placeholders for unanswered calls, then deferred user messages. */
  private tail(): WireMessage[] {
    if (this.pending.size === 0 && this.deferred.length === 0) return [];
    const missing = [...this.pending].map((id): WireMessage => ({ role: 'tool', tool_call_id: id, content: MISSING_TOOL_RESULT }));
    return [...missing, ...this.deferred];
  }

  private add(event: SessionEvent): void {
    switch (event.type) {
      case 'user/message':
      case 'steering/message': {
        const message: WireMessage = { role: 'user', content: userContent(event.content) };
        if (this.pending.size > 0) this.deferred.push(message);
        else this.settled.push(message);
        break;
      }
      case 'assistant/message': {
        this.settleMissing();
        const calls = event.toolCalls ?? [];
        const message: Extract<WireMessage, { role: 'assistant' }> = { role: 'assistant', content: joinText(event.content) };
        if (calls.length > 0) {
          message.tool_calls = calls.map((c) => ({
            id: c.id,
            type: 'function',
            // An empty argument string is not JSON; servers that parse history reject it.
            function: { name: c.name, arguments: c.arguments === '' ? '{}' : c.arguments },
          }));
          for (const c of calls) this.pending.add(c.id);
        }
        const reasoning = reasoningToSend(this.model, event);
        if (reasoning !== undefined) message.reasoning_content = reasoning;
        this.settled.push(message);
        break;
      }
      case 'tool/result': {
        if (!this.pending.delete(event.callId)) break;
        this.settled.push({ role: 'tool', tool_call_id: event.callId, content: toolContent(event.content, event.isError) });
        if (this.pending.size === 0) this.flushDeferred();
        break;
      }
      case 'usage':
      case 'turn/end':
        break;
    }
  }

  /** A new assistant message: calls still unanswered never will be. */
  private settleMissing(): void {
    for (const id of this.pending) this.settled.push({ role: 'tool', tool_call_id: id, content: MISSING_TOOL_RESULT });
    this.pending.clear();
    this.flushDeferred();
  }

  private flushDeferred(): void {
    this.settled.push(...this.deferred);
    this.deferred = [];
  }
}

/** Histories by log: the agent loop passes a child's event array by identity on every step. */
const histories = new WeakMap<readonly SessionEvent[], ChatHistory>();

function historyFor(model: string, system: string, events: readonly SessionEvent[]): ChatHistory {
  let history = histories.get(events);
  if (history === undefined || !history.follows(events, model, system)) {
    history = new ChatHistory(model, system);
    histories.set(events, history);
  }
  return history;
}

export function chatMessagesFor(model: string, system: string, events: readonly SessionEvent[]): WireMessage[] {
  return historyFor(model, system, events).messages(events);
}

/** The JSON text of `chatMessagesFor(...)`, equal to its `JSON.stringify`, kept per log like the messages. */
export function chatMessagesJsonFor(model: string, system: string, events: readonly SessionEvent[]): string {
  return historyFor(model, system, events).json(events);
}

/** The same conversion from scratch, for one-off use (and to check the incremental one). */
export function toChatMessages(model: string, system: string, events: readonly SessionEvent[]): WireMessage[] {
  return new ChatHistory(model, system).messages(events);
}
