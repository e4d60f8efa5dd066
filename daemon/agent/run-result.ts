/**
 * The terminal result of one run, read from the events that run appended (never from a fork
 * seed or an earlier run of the same session), so a child that said nothing of its own never
 * returns somebody else's message.
 */
import { boundDiagnostic, type ContentBlock, type SessionEvent, type SubagentResult, type SubagentStopReason, type Usage } from '../../protocol/index.js';
import { STRUCTURED_OUTPUT_TOOL, type StructuredCapture } from './tools/structured-output.js';

export interface RunResultInput {
  /** The events this run appended, in order. */
  readonly events: readonly SessionEvent[];
  /** Whether the run was cancelled (its signal or a dispose) at any point. */
  readonly cancelled: boolean;
  /** Text streamed by a step that produced no message, used when no message exists. */
  readonly partialText?: string;
  /** Present when the start asked for an output schema. */
  readonly structured?: StructuredCapture;
}

export function buildRunResult(input: RunResultInput): SubagentResult {
  const end = findLast(input.events, (e) => e.type === 'turn/end');
  let stopReason: SubagentStopReason = end ? stopReasonOf(end.reason) : 'error';
  let diagnostic = end ? end.diagnostic : 'the child ended without finishing a turn';

  const capture = input.structured;
  if (capture && stopReason === 'completed' && !capture.captured) {
    stopReason = 'error';
    diagnostic = `the child finished without delivering its result through ${STRUCTURED_OUTPUT_TOOL}`;
  }
  if (input.cancelled && stopReason !== 'completed') {
    stopReason = 'aborted';
    diagnostic = undefined;
  }

  const usage = sumUsage(input.events);
  return {
    output: outputOf(input.events, input.partialText ?? ''),
    ...(capture?.captured && stopReason === 'completed' && { structured: structuredClone(capture.data) }),
    ...(diagnostic !== undefined && { diagnostic: boundDiagnostic(diagnostic) }),
    stopReason,
    ...(usage && { usage }),
  };
}

/** The in-process mapping from a turn's end to the seam's stop reason. Unknown means failure. */
export function stopReasonOf(reason: string): SubagentStopReason {
  switch (reason) {
    case 'completed':
      return 'completed';
    case 'max-tokens':
      return 'max-tokens';
    case 'aborted':
      return 'aborted';
    case 'blocked':
      return 'refusal';
    default:
      return 'error';
  }
}

function outputOf(events: readonly SessionEvent[], partialText: string): ContentBlock[] {
  for (let i = events.length - 1; i >= 0; i -= 1) {
    const event = events[i];
    if (event?.type === 'assistant/message' && event.content.some((b) => b.type !== 'text' || b.text !== '')) {
      return structuredClone(event.content);
    }
  }
  return partialText === '' ? [] : [{ type: 'text', text: partialText }];
}

function sumUsage(events: readonly SessionEvent[]): Usage | undefined {
  let total: Usage | undefined;
  for (const event of events) {
    if (event.type !== 'usage') continue;
    const u = event.usage;
    total = {
      promptTokens: (total?.promptTokens ?? 0) + u.promptTokens,
      completionTokens: (total?.completionTokens ?? 0) + u.completionTokens,
      cacheHitTokens: (total?.cacheHitTokens ?? 0) + u.cacheHitTokens,
      cacheMissTokens: (total?.cacheMissTokens ?? 0) + u.cacheMissTokens,
      reasoningTokens: (total?.reasoningTokens ?? 0) + u.reasoningTokens,
    };
  }
  return total;
}

function findLast<E extends SessionEvent>(events: readonly SessionEvent[], match: (event: SessionEvent) => event is E): E | undefined {
  for (let i = events.length - 1; i >= 0; i -= 1) {
    const event = events[i] as SessionEvent;
    if (match(event)) return event;
  }
  return undefined;
}
