/**
 * Stand-in for the model-facing `subagent` tool (the seam's tool rules: wording derived from
 * `inheritsParentContext`, the `{description, prompt, run_in_background?}` input, and how a
 * non-`completed` run reads as an error). The `tool/` folder owns these rules; this file exists
 * only until `createSubagentTool` lands in main, and is then replaced by it, not kept beside it.
 */
import { SubagentError, type SubagentResult } from '../../protocol/index.js';
import type { ProviderInfo } from '../../client/index.js';

export interface ToolText {
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
}

/** The tool's wording and input schema for one provider. */
export function describeSubagentTool(provider: ProviderInfo, background: boolean): ToolText {
  const lead = provider.inheritsParentContext
    ? 'Delegate a task to a subagent that inherits this conversation (its completed turns, not the one in flight).'
    : 'Delegate a self-contained task to a separate agent working in its own context: it does not see this conversation, and you get its result, not its steps.';
  const tail = background
    ? ' With run_in_background the call returns a job id at once; read the result with job_output and stop it with job_kill.'
    : ' The call waits for the subagent and returns its result.';
  const prompt = provider.inheritsParentContext
    ? 'What is new for the subagent: it already has the completed turns of this conversation.'
    : 'The full task: include everything it needs, since it starts with nothing else.';
  return {
    description: lead + tail,
    inputSchema: {
      type: 'object',
      properties: {
        description: { type: 'string', description: 'A short (3-5 word) description of the task, shown while it runs.' },
        prompt: { type: 'string', description: prompt },
        ...(background && { run_in_background: { type: 'boolean', description: 'Return a job id at once instead of waiting.' } }),
      },
      required: ['description', 'prompt'],
      additionalProperties: false,
    },
  };
}

const HEADLINES: Record<string, string> = {
  aborted: 'subagent run was cancelled',
  error: 'subagent run failed',
  'max-tokens': 'subagent run hit its token limit before finishing',
  refusal: 'subagent declined the task',
};

export const textOf = (result: Pick<SubagentResult, 'output'>): string =>
  result.output.map((block) => (block.type === 'text' ? block.text : '')).join('');

/** A settled run as the model reads it: the output, or a headline, the diagnostic and any partial output. */
export function readResult(result: SubagentResult): { readonly text: string; readonly isError: boolean } {
  if (result.stopReason === 'completed') return { text: textOf(result), isError: false };
  const lines = [HEADLINES[result.stopReason] ?? `subagent run ended abnormally (${result.stopReason})`];
  if (result.diagnostic) lines.push(`Diagnostic: ${result.diagnostic}`);
  const partial = textOf(result);
  if (partial) lines.push(`Partial output before the run ended:\n${partial}`);
  return { text: lines.join('\n'), isError: true };
}

/** A run that could not start, or whose result or dispose failed. */
export function readFailure(error: unknown): string {
  const reason = error instanceof SubagentError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error);
  return `subagent run failed\nDiagnostic: ${reason}`;
}
