/**
 * The `openai-compatible` model adapter: one model step = one streamed chat-completions request
 * (DeepSeek, OpenAI, or any server speaking the same wire format), sent with the official
 * `openai` SDK.
 *
 * Over 400 lines on purpose: the retry policy, the two watchdogs and the attempt's reading of the
 * stream act on one request's state and decide together when a step has failed; the message
 * conversion (chat-messages.ts) and the chunks' assembly into a step (chat-chunks.ts) live apart.
 *
 * What the adapter adds on top of the SDK:
 * - its own retry policy (the SDK's is disabled): 429/500/502/503/504 and connection failures
 *   are retried with capped exponential backoff, honouring `Retry-After`, but only while no
 *   stream data has arrived; everything else fails at once. Each retry is announced (`onRetry`:
 *   attempt, delay, reason) before its wait, so a person watching knows why nothing moves;
 * - watchdogs: an idle timer re-armed by parsed data chunks, and before the first one by the
 *   provider's keep-alive lines (SSE comments the SDK drops, seen by upstream/keep-alive-fetch.ts:
 *   a request queued at the provider is waiting, not stalled, reported as model-wait and bounded by
 *   the first-byte limit); and a ceiling on the whole step, retries included, that does not count
 *   the wait for the endpoint's permit (daemon/upstream/governor.ts);
 * - conversion of the session log to chat messages, with DeepSeek's `reasoning_content` rule
 *   delegated to `deepseek.ts`;
 * - the request body sent as JSON text we build, not as an object the SDK serializes: the
 *   messages' text is kept per child and only extended each step (chat-messages.ts), so a step's
 *   encoding cost does not grow with the history. The text is exactly the body's JSON.
 */
import { endpointOrigin, reportModelRequest } from '../../telemetry/model-requests.js';
import type OpenAI from 'openai';
import type {
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { Usage } from '../../../protocol/index.js';
import {
  ModelError,
  type ModelAdapter,
  type ModelStep,
  type ModelStepRequest,
} from './model-adapter.js';
import { chatMessagesFor, chatMessagesJsonFor } from './chat-messages.js';
import { ToolCallAssembler, toFinish, toUsage, type Delta } from './chat-chunks.js';
import { PausableTimer } from './pausable-timer.js';
import type { EndpointGovernor, Permit, Requester } from '../../upstream/governor.js';
import { keepAliveFetch, withStreamHooks } from '../../upstream/keep-alive-fetch.js';

export interface OpenAICompatibleOptions {
  /** Base URL of the API, e.g. `https://api.deepseek.com` (the SDK appends `/chat/completions`). */
  readonly baseUrl: string;
  readonly apiKey: string;
  /** Retries after the first attempt for retryable failures. Default 3. */
  readonly maxRetries?: number;
  /** First backoff delay; doubles per retry. Default 500 ms. */
  readonly retryBaseDelayMs?: number;
  /** Cap on any single backoff delay, `Retry-After` included. Default 20 s. */
  readonly retryMaxDelayMs?: number;
  /** Longest gap allowed between data chunks (and before the first). Default 60 s. */
  readonly idleTimeoutMs?: number;
  /** Ceiling on a whole step, retries and backoff included. Default 10 min. */
  readonly stepTimeoutMs?: number;
  /** `max_tokens` for each request; left to the server when unset. */
  readonly maxTokens?: number;
  /** Extra HTTP headers for every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * How long a sent request may wait for its first data chunk, keep-alive comments included
   * (a provider queueing it). Default 10 min; the endpoint's governor's setting wins.
   */
  readonly firstByteTimeoutMs?: number;
  /** The endpoint's shared limiter (daemon/upstream/): every attempt takes a permit from it first. */
  readonly governor?: EndpointGovernor;
}

const RETRYABLE_STATUS: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

const DEFAULTS = {
  maxRetries: 3,
  retryBaseDelayMs: 500,
  retryMaxDelayMs: 20_000,
  idleTimeoutMs: 60_000,
  stepTimeoutMs: 10 * 60_000,
  firstByteTimeoutMs: 10 * 60_000,
} as const;

/** Push-backs (429/503) one step absorbs through the governor before they count as retries. */
const MAX_PUSHBACKS = 20;
/** How often a provider-side wait (keep-alive comments) is announced again as model-wait. */
const WAIT_ANNOUNCE_EVERY_MS = 15_000;
const ANONYMOUS: Requester = { client: 'anonymous', lineage: 'anonymous' };

// ---------------------------------------------------------------------------------------------
// Retry timing

/**
 * Milliseconds to wait according to a `Retry-After` header (delta-seconds or an HTTP date), or
 * undefined when the header is absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/**
 * Delay before retry number `retry` (0-based): the server's `Retry-After` if it gave one,
 * otherwise exponential backoff with jitter in [half, full] of `base * 2^retry`; never above `cap`.
 */
export function retryDelayMs(
  retry: number,
  retryAfterMs: number | undefined,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, capMs);
  const full = Math.min(capMs, baseMs * 2 ** retry);
  return full / 2 + (random() * full) / 2;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// Streaming

interface AttemptState {
  /** Set once the attempt has received a data chunk; from then on it is never retried. */
  gotData: boolean;
}

/** The body's JSON text, with the messages' text (already serialized) spliced in. */
function encodeBody(body: ChatCompletionCreateParamsStreaming, messagesJson: string): string {
  const { model, messages: _serialized, ...rest } = body;
  // `rest` always holds `stream`, so its text is never the empty object.
  return `{"model":${JSON.stringify(model)},"messages":${messagesJson},${JSON.stringify(rest).slice(1)}`;
}

const JSON_CONTENT = { 'content-type': 'application/json' };

async function streamOnce(
  client: OpenAI,
  body: ChatCompletionCreateParamsStreaming,
  encoded: string,
  signal: AbortSignal,
  state: AttemptState,
  onChunk: () => void,
  onDelta: ModelStepRequest['onDelta'],
  maxTextBytes: number | undefined,
): Promise<ModelStep> {
  // Held text stops growing once past the cap (a UTF-16 unit is at most 3 UTF-8 bytes, and at
  // least one, so `maxTextBytes` units always reach past `maxTextBytes` bytes).
  const keep = maxTextBytes ?? Number.POSITIVE_INFINITY;
  const emit = (kind: 'text' | 'reasoning', text: string): void => {
    if (onDelta === undefined) return;
    try {
      onDelta({ kind, text });
    } catch {
      // The contract says onDelta must not throw; a faulty listener must not break the step.
    }
  };

  // A string body with its content type is sent as it is; `stream` is still read from `body`.
  const stream = await client.chat.completions.create(body, { signal, maxRetries: 0, body: encoded, headers: JSON_CONTENT });
  let text = '';
  let reasoning = '';
  let finishReason: string | undefined;
  let usage: Usage | undefined;
  const tools = new ToolCallAssembler();

  for await (const chunk of stream) {
    onChunk(); // before gotData is set: it tells the first chunk from the rest
    state.gotData = true;
    if (typeof chunk !== 'object' || chunk === null) {
      throw new ModelError('protocol', `stream chunk is not a JSON object: ${JSON.stringify(chunk)}`);
    }
    if (chunk.usage) usage = toUsage(chunk.usage);
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    const choice = choices.find((c) => c.index === 0) ?? choices[0];
    if (choice === undefined) continue;
    const delta = (choice.delta ?? {}) as Delta;
    if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
      if (reasoning.length <= keep) reasoning += delta.reasoning_content;
      emit('reasoning', delta.reasoning_content);
    }
    if (typeof delta.content === 'string' && delta.content !== '') {
      if (text.length <= keep) text += delta.content;
      emit('text', delta.content);
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) tools.add(call);
    }
    if (typeof choice.finish_reason === 'string') finishReason = choice.finish_reason;
  }

  // The SDK ends the iteration quietly when the request is aborted: the reason is ours.
  if (signal.aborted) throw signal.reason;
  if (finishReason === undefined) {
    throw new ModelError('protocol', 'the stream ended without a finish_reason');
  }
  const step: { -readonly [K in keyof ModelStep]: ModelStep[K] } = {
    text,
    toolCalls: tools.finish(),
    finish: toFinish(finishReason),
  };
  if (reasoning !== '') step.reasoning = reasoning;
  if (usage !== undefined) step.usage = usage;
  return step;
}

/** The API's own error message when the body had one, else the SDK's description. */
function apiMessage(err: InstanceType<typeof OpenAI.APIError>): string {
  const body: unknown = err.error;
  if (typeof body === 'object' && body !== null) {
    const message = (body as { message?: unknown }).message;
    if (typeof message === 'string' && message !== '') return message;
  }
  return err.message;
}

interface Classified {
  readonly error: ModelError;
  readonly retryable: boolean;
  readonly retryAfterMs?: number | undefined;
}

type OpenAISdk = typeof import('openai').default;
let sdkLoading: Promise<OpenAISdk> | undefined;
/** The SDK is loaded by the first step that needs it, not at daemon start (it costs ~0.5 s). */
const loadSdk = (): Promise<OpenAISdk> => (sdkLoading ??= import('openai').then((module) => module.default));

function classify(err: unknown, state: AttemptState, baseUrl: string, OpenAI: OpenAISdk): Classified {
  if (err instanceof ModelError) return { error: err, retryable: false };
  if (err instanceof SyntaxError) {
    return { error: new ModelError('protocol', `malformed stream chunk: ${err.message}`), retryable: false };
  }
  if (err instanceof OpenAI.APIConnectionError) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return {
      error: new ModelError('http', `cannot reach ${baseUrl}: ${err.message}${cause}`),
      retryable: !state.gotData,
    };
  }
  if (err instanceof OpenAI.APIError) {
    const status = err.status;
    if (typeof status !== 'number') {
      // An error event inside an otherwise successful stream.
      return { error: new ModelError('http', apiMessage(err)), retryable: false };
    }
    return {
      error: new ModelError('http', apiMessage(err), status),
      retryable: RETRYABLE_STATUS.has(status) && !state.gotData,
      retryAfterMs: parseRetryAfter(err.headers?.get('retry-after')),
    };
  }
  // A transport failure while reading the body (connection reset, undici "terminated", ...).
  const detail = err instanceof Error ? err.message : String(err);
  return { error: new ModelError('http', `the response stream failed: ${detail}`), retryable: !state.gotData };
}

/** Tell the listener what is retried and when; attempts count from 1, so retry 0 is attempt 2. */
function announceRetry(onRetry: ModelStepRequest['onRetry'], retry: number, delayMs: number, error: ModelError): void {
  if (onRetry === undefined) return;
  const status = error.status;
  try {
    onRetry({ attempt: retry + 2, delayMs, reason: status === undefined ? error.message : `HTTP ${status}: ${error.message}`, ...(status !== undefined && { status }) });
  } catch {
    // Like onDelta: a faulty listener must not break the step.
  }
}

function numberOption(name: string, value: number | undefined, fallback: number, allowZero = false): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new ModelError('config', `${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${value}`);
  }
  return value;
}

export function createOpenAICompatibleAdapter(options: OpenAICompatibleOptions): ModelAdapter {
  const maxRetries = Math.floor(numberOption('maxRetries', options.maxRetries, DEFAULTS.maxRetries, true));
  const retryBaseDelayMs = numberOption('retryBaseDelayMs', options.retryBaseDelayMs, DEFAULTS.retryBaseDelayMs, true);
  const retryMaxDelayMs = numberOption('retryMaxDelayMs', options.retryMaxDelayMs, DEFAULTS.retryMaxDelayMs, true);
  const idleTimeoutMs = numberOption('idleTimeoutMs', options.idleTimeoutMs, DEFAULTS.idleTimeoutMs);
  const stepTimeoutMs = numberOption('stepTimeoutMs', options.stepTimeoutMs, DEFAULTS.stepTimeoutMs);
  if (options.baseUrl.trim() === '') throw new ModelError('config', 'baseUrl is empty');
  if (options.apiKey === '') throw new ModelError('config', 'apiKey is empty (use any value for servers without auth)');

  const newClient = (OpenAI: OpenAISdk): OpenAI => new OpenAI({
    apiKey: options.apiKey,
    baseURL: options.baseUrl,
    // Never pick up OpenAI account settings from the environment for a third-party server.
    organization: null,
    project: null,
    adminAPIKey: null,
    maxRetries: 0,
    // The SDK's timeout only covers waiting for response headers; ours (which fire first) cover
    // the stream too.
    timeout: stepTimeoutMs + 1_000,
    logLevel: 'off',
    // Sees the keep-alive comments the SDK drops (upstream/keep-alive-fetch.ts).
    fetch: keepAliveFetch(),
    ...(options.headers !== undefined ? { defaultHeaders: { ...options.headers } } : {}),
  });
  let client: OpenAI | undefined;
  const endpoint = endpointOrigin(options.baseUrl);
  const governor = options.governor;
  const firstByteTimeoutMs = numberOption('firstByteTimeoutMs', governor?.firstByteTimeoutMs ?? options.firstByteTimeoutMs, DEFAULTS.firstByteTimeoutMs);

  async function step(request: ModelStepRequest): Promise<ModelStep> {
    if (request.signal.aborted) throw new ModelError('aborted', 'the step was aborted before it started');

    const messages = chatMessagesFor(request.model, request.system, request.events) as ChatCompletionMessageParam[];
    const body: ChatCompletionCreateParamsStreaming = {
      model: request.model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    };
    if (request.tools.length > 0) {
      body.tools = request.tools.map((t) => ({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: { ...t.parameters } },
      }));
    }
    if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens;
    const encoded = encodeBody(body, chatMessagesJsonFor(request.model, request.system, request.events));

    // One controller per step: the caller's signal and the watchdogs abort it with a ModelError
    // as the reason, and the first reason wins.
    const controller = new AbortController();
    const fail = (error: ModelError): void => {
      if (!controller.signal.aborted) controller.abort(error);
    };
    const onCallerAbort = (): void => fail(new ModelError('aborted', 'the step was aborted by the caller'));
    request.signal.addEventListener('abort', onCallerAbort, { once: true });
    // The step's ceiling does not count the time spent waiting for the endpoint's permit.
    const stepTimer = new PausableTimer(
      () => fail(new ModelError('step-timeout', `step-timeout: the step did not complete within stepTimeoutMs=${stepTimeoutMs} ms`)),
      stepTimeoutMs,
    );
    let idleTimer: NodeJS.Timeout | undefined;
    const disarmIdle = (): void => {
      if (idleTimer !== undefined) clearTimeout(idleTimer);
      idleTimer = undefined;
    };
    const armIdle = (): void => {
      disarmIdle();
      idleTimer = setTimeout(
        () => fail(new ModelError('idle-timeout', `idle-timeout: no data from the model for idleTimeoutMs=${idleTimeoutMs} ms`)),
        idleTimeoutMs,
      );
    };
    let firstByteTimer: NodeJS.Timeout | undefined;
    const disarmFirstByte = (): void => {
      if (firstByteTimer !== undefined) clearTimeout(firstByteTimer);
      firstByteTimer = undefined;
    };
    const waitEndpoint = governor?.label ?? options.baseUrl;
    const announceWait = (position: number): void => {
      if (request.onWait === undefined || controller.signal.aborted) return;
      try {
        request.onWait({ endpoint: waitEndpoint, position });
      } catch {
        // Like onDelta: a faulty listener must not break the step.
      }
    };

    try {
      const sdk = await loadSdk();
      client ??= newClient(sdk);
      let retries = 0;
      let pushbacks = 0;
      for (;;) {
        const state: AttemptState = { gotData: false };
        let permit: Permit | undefined;
        if (governor !== undefined) {
          stepTimer.pause();
          try {
            permit = await governor.acquire(request.requester ?? ANONYMOUS, controller.signal, announceWait);
          } catch (err) {
            if (controller.signal.aborted) throw controller.signal.reason;
            throw err;
          } finally {
            stepTimer.resume();
          }
        }
        // Until the first data chunk the provider may hold the request (keep-alive comments):
        // that is waiting, bounded by the first-byte limit, and shown as model-wait.
        let lastWaitShown = 0;
        const onKeepAlive = (): void => {
          if (state.gotData) return;
          armIdle();
          const now = Date.now();
          if (now - lastWaitShown >= WAIT_ANNOUNCE_EVERY_MS) {
            lastWaitShown = now;
            announceWait(0);
          }
        };
        firstByteTimer = setTimeout(
          () => fail(new ModelError('idle-timeout', `first-byte-timeout: no data from the model within firstByteTimeoutMs=${firstByteTimeoutMs} ms of sending the request`)),
          firstByteTimeoutMs,
        );
        const onChunk = (): void => {
          if (!state.gotData) {
            disarmFirstByte();
            permit?.streaming();
          }
          armIdle();
        };
        try {
          armIdle();
          const result = await withStreamHooks({ onKeepAlive }, () =>
            streamOnce(client!, body, encoded, controller.signal, state, onChunk, request.onDelta, request.maxTextBytes),
          );
          reportModelRequest(endpoint, 200);
          permit?.release({ kind: 'ok', ...(result.usage && { tokens: result.usage.promptTokens + result.usage.completionTokens }) });
          return result;
        } catch (err) {
          disarmIdle();
          disarmFirstByte();
          if (controller.signal.aborted) {
            permit?.release({ kind: 'other' });
            throw controller.signal.reason;
          }
          const classified = classify(err, state, options.baseUrl, sdk);
          reportModelRequest(endpoint, classified.error.status ?? 'error');
          const pushback = classified.retryable && (classified.error.status === 429 || classified.error.status === 503);
          permit?.release(pushback ? { kind: 'throttled', retryAfterMs: classified.retryAfterMs } : { kind: 'other' });
          if (!classified.retryable) throw classified.error;
          if (pushback && governor !== undefined && pushbacks < MAX_PUSHBACKS) {
            // The governor paused the endpoint and lowered its limit: the next attempt waits its
            // turn there, and a push-back the whole endpoint absorbs does not use up the step's retries.
            pushbacks += 1;
            announceRetry(request.onRetry, pushbacks + retries - 1, Math.round(Math.min(classified.retryAfterMs ?? 0, retryMaxDelayMs)), classified.error);
            continue;
          }
          if (retries >= maxRetries) throw classified.error;
          const delayMs = Math.round(retryDelayMs(retries, classified.retryAfterMs, retryBaseDelayMs, retryMaxDelayMs));
          announceRetry(request.onRetry, retries + pushbacks, delayMs, classified.error);
          retries += 1;
          await sleep(delayMs, controller.signal);
        }
      }
    } catch (err) {
      // Release the connection on every failure path (a no-op when already aborted).
      controller.abort();
      throw err;
    } finally {
      stepTimer.clear();
      disarmIdle();
      disarmFirstByte();
      request.signal.removeEventListener('abort', onCallerAbort);
    }
  }

  return { name: 'openai-compatible', step };
}
