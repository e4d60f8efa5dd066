/**
 * How a start's progress and a model retry read to a person: one wording for every surface that
 * shows them (the CLI's status line and stderr, the MCP face's progress messages, ACP session info).
 */
import type { ModelWaitEvent, RetryEvent, RunEvent, StartProgress } from '../protocol/index.js';

/** 1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st … */
export function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** `queued (2nd in line)`, `starting ACP agent… (spawning)`, … */
export function describeStartProgress(value: StartProgress, provider: string): string {
  switch (value.kind) {
    case 'queued':
      return `queued (${ordinal(value.position)} in line)`;
    case 'starting':
      return `starting the ${provider} child`;
    case 'agent':
      return `starting ACP agent… (${value.stage})`;
    case 'ready':
      return 'running';
  }
}

/** `model busy, retrying in 2.0 s (attempt 2)`; busy is what 429 and 503 mean, else the reason is named. */
export function describeRetry(event: RetryEvent): string {
  const busy = event.status === 429 || event.status === 503;
  return `${busy ? 'model busy' : `model failed (${event.reason})`}, retrying in ${(event.delayMs / 1000).toFixed(1)} s (attempt ${event.attempt})`;
}

/** `waiting for the model endpoint (3rd in line)`, or `queued at the model provider` once sent and held there. */
export function describeModelWait(event: ModelWaitEvent): string {
  return event.position > 0 ? `waiting for the model endpoint (${ordinal(event.position)} in line)` : 'queued at the model provider, waiting for its first token';
}

/** The run events that are waits rather than work: a model retry or wait, and (since 1.6) the start's queue and ACP agent stages. */
export type WaitEvent = Extract<RunEvent, { kind: 'retry' | 'model-wait' | 'queued' | 'agent-starting' }>;

export function isWaitEvent(event: RunEvent): event is WaitEvent {
  return event.kind === 'retry' || event.kind === 'model-wait' || event.kind === 'queued' || event.kind === 'agent-starting';
}

/** One wording per wait: the start's kinds read as their `$/progress` twins do. */
export function describeWait(event: WaitEvent): string {
  switch (event.kind) {
    case 'retry':
      return describeRetry(event);
    case 'model-wait':
      return describeModelWait(event);
    case 'queued':
      return describeStartProgress(event, '');
    case 'agent-starting':
      return describeStartProgress({ kind: 'agent', stage: event.stage }, '');
  }
}
