/**
 * The model seam of the child-agent runtime: one call = one model step. Adapters turn the
 * session's events into their wire format (so API quirks such as DeepSeek's `reasoning_content`
 * stay inside the adapter) and return the step's assistant message.
 */
import type { ModelWaitEvent, RetryEvent, SessionEvent, ToolCall, Usage } from '../../../protocol/index.js';

/** A tool as the model is offered it. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments. */
  readonly parameters: Record<string, unknown>;
}

export interface ModelStepRequest {
  /** Model name for the adapter (e.g. `deepseek-chat`). */
  readonly model: string;
  readonly system: string;
  /** The session so far, seed included, in log order. */
  readonly events: readonly SessionEvent[];
  readonly tools: readonly ToolSpec[];
  readonly signal: AbortSignal;
  /** Streaming deltas as they arrive, for progress UIs. Must not throw. */
  readonly onDelta?: (delta: { kind: 'text' | 'reasoning'; text: string }) => void;
  /** A failed attempt will be retried after `delayMs`, for progress UIs. Must not throw. */
  readonly onRetry?: (retry: Omit<RetryEvent, 'kind'>) => void;
  /**
   * The request waits for its endpoint: queued behind others for a permit (`position` 1 is
   * next), or sent and held by the provider before its first chunk (`position` 0). Must not throw.
   */
  readonly onWait?: (wait: Omit<ModelWaitEvent, 'kind'>) => void;
  /** Whose request this is, for the endpoint's fair order: the client and the lineage's root run. */
  readonly requester?: { readonly client: string; readonly lineage: string };
  /**
   * Text (and, separately, reasoning) a step keeps, in UTF-8 bytes: past it the adapter stops
   * accumulating (deltas still stream), since the service cuts a run's output to this cap anyway
   * and says so. Absent: no bound.
   */
  readonly maxTextBytes?: number;
}

/** Why the model stopped this step, normalised across APIs. */
export type ModelFinish = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'other';

export interface ModelStep {
  readonly text: string;
  readonly reasoning?: string;
  readonly toolCalls: readonly ToolCall[];
  readonly finish: ModelFinish;
  readonly usage?: Usage;
}

/** A step that could not complete. `kind` lets the loop tell cancellation from failure. */
export class ModelError extends Error {
  override readonly name = 'ModelError';
  constructor(
    readonly kind: 'aborted' | 'idle-timeout' | 'step-timeout' | 'http' | 'protocol' | 'config',
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ModelAdapter {
  /** Registry name, e.g. `openai-compatible` or `scripted`. */
  readonly name: string;
  step(request: ModelStepRequest): Promise<ModelStep>;
}

/** A model chosen for one child: the adapter and the model name to pass it. */
export interface ResolvedModel {
  readonly adapter: ModelAdapter;
  readonly model: string;
}

/** Picks the model for a start (`agentOptions.model`, else the daemon's default). Throws ModelError('config'). */
export type ModelResolver = (name: string | undefined) => ResolvedModel;
