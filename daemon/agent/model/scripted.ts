/**
 * The `scripted` model adapter: replays a JSON script of model steps, for tests, demos and the
 * offline default. No network, fully deterministic.
 *
 * Script format (validated on load; errors name the field):
 *
 *   {
 *     "steps": [
 *       {
 *         "text": "streamed in a few deltas",          // optional, default ""
 *         "reasoning": "shown as reasoning deltas",     // optional
 *         "toolCalls": [                                // optional
 *           { "name": "read_file", "arguments": { "path": "README.md" }, "id": "call-1" }
 *         ],                                            // arguments: an object, or a raw string
 *                                                       // (to script malformed JSON); id optional
 *         "finish": "stop",                             // stop | tool_calls | length | content_filter;
 *                                                       // default tool_calls with calls, else stop
 *         "delayMs": 100,                               // wait before answering (abortable)
 *         "usage": { "promptTokens": 10, "completionTokens": 5 },  // missing counters are 0
 *         "error": { "kind": "http", "message": "502 from upstream", "status": 502 }
 *                                                       // fail the step with ModelError(kind) after
 *                                                       // streaming any text
 *       }
 *     ]
 *   }
 *
 * Each model step of a child consumes that child's next entry; a child that asks for more steps
 * than the script has gets a ModelError('protocol'). A child is recognised by its session's
 * event array, which the loop passes by identity on every step, so one adapter can serve many
 * children (each replays the script from its first entry).
 */
import { readFileSync } from '../../../common/node-builtins.js';
import type { ValidateFunction } from 'ajv';
import { describeAjvError, type SessionEvent, type ToolCall, type Usage } from '../../../protocol/index.js';
import { newAjv } from '../../../protocol/validation.js';
import { ModelError, type ModelAdapter, type ModelFinish, type ModelStep, type ModelStepRequest } from './model-adapter.js';

export interface ScriptedToolCall {
  readonly name: string;
  readonly arguments: Record<string, unknown> | string;
  readonly id?: string;
}

export interface ScriptedStep {
  readonly text?: string;
  readonly reasoning?: string;
  readonly toolCalls?: readonly ScriptedToolCall[];
  readonly finish?: 'stop' | 'tool_calls' | 'length' | 'content_filter';
  readonly delayMs?: number;
  readonly usage?: Partial<Usage>;
  readonly error?: { readonly kind: Exclude<ModelError['kind'], 'aborted'>; readonly message: string; readonly status?: number };
}

export interface ModelScript {
  readonly steps: readonly ScriptedStep[];
}

const count = { type: 'integer', minimum: 0 };
const scriptSchema = {
  type: 'object',
  required: ['steps'],
  additionalProperties: false,
  properties: {
    steps: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        properties: {
          text: { type: 'string' },
          reasoning: { type: 'string' },
          toolCalls: {
            type: 'array',
            items: {
              type: 'object',
              required: ['name', 'arguments'],
              additionalProperties: false,
              properties: {
                name: { type: 'string', minLength: 1 },
                arguments: { type: ['object', 'string'] },
                id: { type: 'string', minLength: 1 },
              },
            },
          },
          finish: { enum: ['stop', 'tool_calls', 'length', 'content_filter'] },
          delayMs: count,
          usage: {
            type: 'object',
            additionalProperties: false,
            properties: {
              promptTokens: count,
              completionTokens: count,
              cacheHitTokens: count,
              cacheMissTokens: count,
              reasoningTokens: count,
            },
          },
          error: {
            type: 'object',
            required: ['kind', 'message'],
            additionalProperties: false,
            properties: {
              kind: { enum: ['idle-timeout', 'step-timeout', 'http', 'protocol', 'config'] },
              message: { type: 'string' },
              status: { type: 'integer' },
            },
          },
        },
      },
    },
  },
};

/** The script file's JSON Schema; test/schema-meta.spec.ts checks it against the meta-schema. */
export const SCRIPT_SCHEMA: object = scriptSchema;

// Compiled with the first script read, not with the daemon (it was ~45 ms of every start), and
// without a meta-schema check at run time (the test above makes it once).
let compiled: ValidateFunction<ModelScript> | undefined;
const scriptValidator = (): ValidateFunction<ModelScript> =>
  (compiled ??= newAjv({ allErrors: false, strict: false, allowUnionTypes: true, validateSchema: false }).compile<ModelScript>(scriptSchema));

/** Checks a parsed script; throws ModelError('config') naming the first bad field. */
export function parseScript(value: unknown, origin = 'script'): ModelScript {
  const validateScript = scriptValidator();
  if (validateScript(value)) return value;
  const failure = describeAjvError(validateScript.errors?.[0], { unknownKey: 'is not a known field', listAllowed: true });
  throw new ModelError('config', `${origin}: ${failure.message}`);
}

/**
 * Reads and validates a script file; every failure is a ModelError('config') naming the file.
 * Synchronous because model resolution (`ModelResolver`) is: the file is small.
 */
export function readScript(path: string): ModelScript {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ModelError('config', `cannot read model script ${path}: ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ModelError('config', `model script ${path} is not valid JSON: ${(error as Error).message}`);
  }
  return parseScript(value, `model script ${path}`);
}

export function createScriptedAdapter(script: ModelScript): ModelAdapter {
  const steps = parseScript(structuredClone(script)).steps;
  const cursors = new WeakMap<readonly SessionEvent[], number>();
  return {
    name: 'scripted',
    async step(request: ModelStepRequest): Promise<ModelStep> {
      const index = cursors.get(request.events) ?? 0;
      cursors.set(request.events, index + 1);
      const entry = steps[index];
      if (!entry) {
        throw new ModelError('protocol', `the model script has ${steps.length} step(s) and this child asked for step ${index + 1}`);
      }
      await sleep(entry.delayMs ?? 0, request.signal);
      if (entry.reasoning) emitInChunks(entry.reasoning, 'reasoning', request);
      if (entry.text) emitInChunks(entry.text, 'text', request);
      if (entry.error) throw new ModelError(entry.error.kind, entry.error.message, entry.error.status);

      const toolCalls: ToolCall[] = (entry.toolCalls ?? []).map((call, i) => ({
        id: call.id ?? `call-${index + 1}-${i + 1}`,
        name: call.name,
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
      }));
      const finish: ModelFinish = entry.finish ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
      return {
        text: entry.text ?? '',
        ...(entry.reasoning !== undefined && { reasoning: entry.reasoning }),
        toolCalls,
        finish,
        ...(entry.usage && { usage: fullUsage(entry.usage) }),
      };
    },
  };
}

function emitInChunks(text: string, kind: 'text' | 'reasoning', request: ModelStepRequest): void {
  const size = Math.max(1, Math.ceil(text.length / 3));
  for (let i = 0; i < text.length; i += size) request.onDelta?.({ kind, text: text.slice(i, i + size) });
}

function fullUsage(usage: Partial<Usage>): Usage {
  return {
    promptTokens: usage.promptTokens ?? 0,
    completionTokens: usage.completionTokens ?? 0,
    cacheHitTokens: usage.cacheHitTokens ?? 0,
    cacheMissTokens: usage.cacheMissTokens ?? 0,
    reasoningTokens: usage.reasoningTokens ?? 0,
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new ModelError('aborted', 'the step was cancelled'));
  if (ms === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new ModelError('aborted', 'the step was cancelled'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
