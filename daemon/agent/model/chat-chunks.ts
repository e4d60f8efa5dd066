/**
 * A chat-completions stream's chunks as a model step's parts, needing nothing of the attempt that
 * reads them (openai-compatible.ts): the delta's shape with DeepSeek's reasoning field, usage as
 * DeepSeek and OpenAI report it, the finish reason, and tool calls assembled from their deltas.
 */
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ToolCall, Usage } from '../../../protocol/index.js';
import { ModelError, type ModelFinish } from './model-adapter.js';

export type Delta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null };

/** Usage as DeepSeek and OpenAI report it; the DeepSeek cache fields are extensions. */
type WireUsage = NonNullable<ChatCompletionChunk['usage']> & {
  prompt_cache_hit_tokens?: number | null;
  prompt_cache_miss_tokens?: number | null;
};

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** Maps a usage object to `Usage`. Cache hits/misses prefer DeepSeek's fields, then OpenAI's. */
export function toUsage(usage: WireUsage): Usage {
  const promptTokens = count(usage.prompt_tokens) ?? 0;
  const cacheHitTokens =
    count(usage.prompt_cache_hit_tokens) ?? count(usage.prompt_tokens_details?.cached_tokens) ?? 0;
  const cacheMissTokens = count(usage.prompt_cache_miss_tokens) ?? Math.max(0, promptTokens - cacheHitTokens);
  return {
    promptTokens,
    completionTokens: count(usage.completion_tokens) ?? 0,
    cacheHitTokens,
    cacheMissTokens,
    reasoningTokens: count(usage.completion_tokens_details?.reasoning_tokens) ?? 0,
  };
}

export function toFinish(reason: string): ModelFinish {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
    case 'length':
    case 'content_filter':
      return reason;
    default:
      return 'other';
  }
}

interface ToolSlot {
  id: string;
  name: string;
  args: string;
}

/** Assembles tool calls from deltas: keyed by `index`; a new `id` at a used index starts a new call. */
export class ToolCallAssembler {
  private readonly slots: ToolSlot[] = [];
  private readonly byIndex = new Map<number, ToolSlot>();

  add(delta: ChatCompletionChunk.Choice.Delta.ToolCall): void {
    const index = typeof delta.index === 'number' ? delta.index : 0;
    let slot = this.byIndex.get(index);
    if (slot === undefined || (delta.id && slot.id !== '' && delta.id !== slot.id)) {
      slot = { id: '', name: '', args: '' };
      this.slots.push(slot);
      this.byIndex.set(index, slot);
    }
    if (delta.id && slot.id === '') slot.id = delta.id;
    const fn = delta.function;
    if (fn?.name) slot.name += fn.name;
    if (fn?.arguments) slot.args += fn.arguments;
  }

  finish(): ToolCall[] {
    return this.slots.map((slot, i) => {
      if (slot.name === '') {
        throw new ModelError('protocol', `tool call #${i} in the stream has no function name`);
      }
      return { id: slot.id !== '' ? slot.id : `call_${i}`, name: slot.name, arguments: slot.args };
    });
  }
}
