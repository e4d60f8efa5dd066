/**
 * One turn of a child: model step → tool calls → tool results → next step, until the model stops
 * calling tools, the step limit is hit, a structured result is captured, or the run is cancelled.
 * Everything the turn does is appended to the session log (and streamed through `emit`); the
 * turn always closes with a `turn/end` and a flush, whatever happened inside it.
 */
import type { Logger } from 'pino';
import { boundDiagnostic, type ContentBlock, type RunEvent, type SessionEvent, type ToolCall, type TurnEndReason } from '../../protocol/index.js';
import { ModelError, type ModelFinish, type ModelStep, type ResolvedModel } from './model/model-adapter.js';
import type { SessionLog } from '../store/session-log.js';
import type { RunBudget } from '../upstream/token-budgets.js';
import type { SteeringQueue } from './steering-queue.js';
import type { ToolRegistry } from './tools/tool-registry.js';

export const DEFAULT_MAX_STEPS = 50;

export interface TurnContext {
  readonly session: SessionLog;
  readonly model: ResolvedModel;
  readonly system: string;
  readonly tools: ToolRegistry;
  readonly steering: SteeringQueue;
  readonly maxSteps: number;
  readonly signal: AbortSignal;
  readonly emit: (event: RunEvent) => void;
  /** The run's output cap (RunHost.maxOutputBytes): no step holds much more text than this. */
  readonly maxOutputBytes?: number;
  /** True when the turn must end after the current tool call (a structured result was captured). */
  readonly captured: () => boolean;
  /** True once an `after-step` interrupt asked the turn to stop at the next step boundary. */
  readonly stopRequested: () => boolean;
  readonly log: Logger;
  /** Whose model requests these are, for the endpoint's fair order (RunHost.requester). */
  readonly requester?: { readonly client: string; readonly lineage: string };
  /** The lineage's token budget (RunHost.budget): the step that crosses it is the turn's last. */
  readonly tokenBudget?: RunBudget;
}

export interface TurnOutcome {
  readonly reason: TurnEndReason;
  /** Text streamed by a step that never produced its message (it failed or was cancelled). */
  readonly partialText: string;
}

/** Runs one turn for `prompt`. Rejects only if the session log cannot be written. */
export async function runTurn(ctx: TurnContext, prompt: ContentBlock[]): Promise<TurnOutcome> {
  const append = (event: SessionEvent): void => {
    ctx.emit({ kind: 'session', event: ctx.session.append(event) });
  };
  let partialText = '';
  const end = async (reason: TurnEndReason, diagnostic?: string): Promise<TurnOutcome> => {
    // Steering that arrived too late for a step is logged, not lost: a resume's model sees it.
    for (const content of ctx.steering.close()) append({ type: 'steering/message', content });
    append({ type: 'turn/end', reason, ...(diagnostic !== undefined && { diagnostic: boundDiagnostic(diagnostic) }) });
    await ctx.session.flush();
    return { reason, partialText };
  };

  ctx.steering.open();
  append({ type: 'user/message', content: structuredClone(prompt) });
  for (let steps = 0; ; steps += 1) {
    if (ctx.signal.aborted) return end('aborted');
    // An after-step interrupt lets the step it arrived in finish (tool results included), then stops.
    if (steps > 0 && ctx.stopRequested()) return end('aborted', 'interrupted after a step');
    for (const content of ctx.steering.drain()) append({ type: 'steering/message', content });
    if (steps >= ctx.maxSteps) return end('max-steps', `stopped after ${ctx.maxSteps} model steps without finishing`);
    // Spent by another run of the lineage (a child this run delegated to, a sibling): no further step.
    const spent = ctx.tokenBudget?.spent();
    if (spent !== undefined) return end('max-tokens', spent);

    partialText = '';
    let step: ModelStep;
    try {
      step = await abortable(
        ctx.model.adapter.step({
          model: ctx.model.model,
          system: ctx.system,
          events: ctx.session.events,
          tools: ctx.tools.specs(),
          signal: ctx.signal,
          ...(ctx.maxOutputBytes !== undefined && { maxTextBytes: ctx.maxOutputBytes }),
          onDelta: (delta) => {
            // An adapter that ignores its signal may keep streaming into a run that has ended.
            if (ctx.signal.aborted) return;
            if (delta.kind === 'text' && partialText.length <= (ctx.maxOutputBytes ?? Number.POSITIVE_INFINITY)) partialText += delta.text;
            ctx.emit({ kind: delta.kind === 'text' ? 'text-delta' : 'reasoning-delta', text: delta.text });
          },
          onRetry: (retry) => {
            if (!ctx.signal.aborted) ctx.emit({ kind: 'retry', ...retry });
          },
          onWait: (wait) => {
            if (!ctx.signal.aborted) ctx.emit({ kind: 'model-wait', ...wait });
          },
          ...(ctx.requester && { requester: ctx.requester }),
        }),
        ctx.signal,
      );
    } catch (error) {
      if (ctx.signal.aborted || (error instanceof ModelError && error.kind === 'aborted')) return end('aborted');
      ctx.log.warn({ err: error }, 'model step failed');
      return end('error', error instanceof Error ? error.message : String(error));
    }
    partialText = '';

    const calls = step.toolCalls;
    append({
      type: 'assistant/message',
      content: step.text === '' ? [] : [{ type: 'text', text: step.text }],
      ...(step.reasoning !== undefined && step.reasoning !== '' && { reasoning: step.reasoning }),
      ...(calls.length > 0 && { toolCalls: calls.map((call) => ({ ...call })) }),
    });
    if (step.usage) append({ type: 'usage', usage: { ...step.usage } });
    const crossed = step.usage && ctx.tokenBudget?.charge(step.usage);
    if (crossed) {
      for (const call of calls) append(toolResult(call, 'Not run: the lineage\'s token budget is spent.'));
      return end('max-tokens', crossed);
    }

    const stopped = finishReason(step.finish);
    if (stopped.reason === 'max-tokens' || stopped.reason === 'blocked') {
      // Calls from a cut-off or filtered step are not run; answering them keeps the log balanced.
      for (const call of calls) append(toolResult(call, `Not run: the model step ended with "${step.finish}".`));
      return end(stopped.reason);
    }
    if (calls.length > 0) {
      const ended = await runToolCalls(ctx, calls, append);
      if (ended === 'aborted') return end('aborted');
      if (ended === 'captured') return end('completed');
      continue;
    }
    // A finished turn with steering waiting takes another step instead of dropping the message.
    if (stopped.reason === 'completed' && ctx.steering.size > 0) continue;
    return end(stopped.reason, stopped.diagnostic);
  }
}

async function runToolCalls(
  ctx: TurnContext,
  calls: readonly ToolCall[],
  append: (event: SessionEvent) => void,
): Promise<'continue' | 'aborted' | 'captured'> {
  for (const call of calls) {
    if (ctx.signal.aborted) {
      append(toolResult(call, 'Not run: the run was cancelled.'));
      continue;
    }
    // The registry itself refuses calls after a capture, so later calls still get a result.
    const outcome = await abortable(ctx.tools.invoke(call, { callId: call.id, signal: ctx.signal }), ctx.signal).catch(
      () => ({ content: [{ type: 'text' as const, text: 'Cancelled while running.' }], isError: true }),
    );
    append({ type: 'tool/result', callId: call.id, name: call.name, content: outcome.content, isError: outcome.isError });
  }
  if (ctx.signal.aborted) return 'aborted';
  return ctx.captured() ? 'captured' : 'continue';
}

function finishReason(finish: ModelFinish): { reason: TurnEndReason; diagnostic?: string } {
  switch (finish) {
    case 'stop':
    case 'tool_calls':
      return { reason: 'completed' };
    case 'length':
      return { reason: 'max-tokens' };
    case 'content_filter':
      return { reason: 'blocked' };
    case 'other':
      return { reason: 'error', diagnostic: 'the model stopped for an unrecognised reason' };
    default: {
      const unknown: never = finish;
      return { reason: 'error', diagnostic: `the model stopped with unknown finish "${String(unknown)}"` };
    }
  }
}

function toolResult(call: ToolCall, text: string): SessionEvent {
  return { type: 'tool/result', callId: call.id, name: call.name, content: [{ type: 'text', text }], isError: true };
}

/**
 * Settles with `promise`, or rejects as soon as `signal` aborts: a model or tool that ignores
 * its signal cannot hold a cancelled turn open. The abandoned promise's failure is swallowed.
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new ModelError('aborted', 'cancelled'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new ModelError('aborted', 'cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
