/**
 * Everything DeepSeek-specific lives here, so the `openai-compatible` adapter stays a plain
 * chat-completions client: the default endpoint and model, and the rule for sending
 * `reasoning_content` back on assistant messages.
 */
import type { SessionEvent } from '../../../protocol/index.js';

/** DeepSeek's chat-completions base URL (the SDK appends `/chat/completions`). */
export const DEEPSEEK_BASE_URL = 'https://api.deepseek.com';

/** The model used when DeepSeek is configured and no model is named. */
export const DEEPSEEK_DEFAULT_MODEL = 'deepseek-chat';

/** The legacy reasoning model, which rejects any request carrying `reasoning_content`. */
export const DEEPSEEK_LEGACY_REASONER = 'deepseek-reasoner';

type AssistantEvent = Extract<SessionEvent, { type: 'assistant/message' }>;

/**
 * Whether `model` names the legacy reasoner. Routers often prefix the vendor
 * (`deepseek/deepseek-reasoner`), so only the last path segment is compared.
 */
export function isLegacyReasoner(model: string): boolean {
  const last = model.trim().toLowerCase().split('/').pop() ?? '';
  return last === DEEPSEEK_LEGACY_REASONER;
}

/**
 * The `reasoning_content` to put on the wire for a recorded assistant message, or undefined to
 * leave the field out.
 *
 * - The legacy `deepseek-reasoner` rejects requests that carry it: never send.
 * - The current thinking mode requires it on every assistant message that carried tool calls
 *   (the request fails with 400 otherwise): send it there whenever it was recorded.
 * - On assistant messages without tool calls it is optional and ignored: leave it out to save
 *   request bytes.
 *
 * Servers that never produce reasoning leave `event.reasoning` unset, so they never see the field.
 */
export function reasoningToSend(model: string, event: AssistantEvent): string | undefined {
  if (isLegacyReasoner(model)) return undefined;
  if (event.reasoning === undefined || event.reasoning === '') return undefined;
  if (!event.toolCalls || event.toolCalls.length === 0) return undefined;
  return event.reasoning;
}

/** Whether a base URL points at DeepSeek's own API (used to pick defaults). */
export function isDeepSeekBaseUrl(baseUrl: string): boolean {
  try {
    return new URL(baseUrl).hostname.toLowerCase() === 'api.deepseek.com';
  } catch {
    return false;
  }
}
