/**
 * How a settled run reads to the model. `completed` is the concatenated text of the output;
 * anything else is an error: a headline per stop reason, then the diagnostic, then any partial
 * output (a non-completed output may be partial, never a success). A rejected result and a failed
 * dispose are kept in the text, and a dispose failure after a completed result is an error too.
 */
import { worktreeNote, type SubagentResult, type SubagentRun } from '../protocol/index.js';

export { worktreeNote };
import { messageOf, textOf, textResult, type ToolResult } from './tool-definition.js';

const HEADLINES: Readonly<Record<string, string>> = {
  aborted: 'subagent run was cancelled',
  error: 'subagent run failed',
  'max-tokens': 'subagent run hit its token limit before finishing',
  refusal: 'subagent declined the task',
};

export function headline(stopReason: string): string {
  return HEADLINES[stopReason] ?? `subagent run ended abnormally (${stopReason})`;
}

/** What a run ended with: its result or the rejection of `result`, and a dispose failure. */
export interface RunSettlement {
  readonly result?: SubagentResult;
  readonly resultError?: unknown;
  readonly disposeError?: unknown;
}

/** Await the result, then dispose exactly once whatever happened. Never rejects. */
export async function settleAndDispose(run: SubagentRun<unknown>): Promise<RunSettlement> {
  let settlement: { result?: SubagentResult; resultError?: unknown } = {};
  try {
    settlement = { result: await run.result };
  } catch (error) {
    settlement = { resultError: error ?? new Error('the run failed') };
  }
  try {
    await run.dispose();
    return settlement;
  } catch (error) {
    return { ...settlement, disposeError: error ?? new Error('dispose failed') };
  }
}

export function toToolResult(settlement: RunSettlement): ToolResult {
  const { result, resultError, disposeError } = settlement;
  const disposeLine = disposeError === undefined ? '' : `\ndispose failed: ${messageOf(disposeError)}`;
  if (result === undefined) {
    return textResult(`subagent run failed: its result was lost (${messageOf(resultError)})${disposeLine}`, true);
  }
  const output = textOf(result.output) + worktreeNote(result);
  if (result.stopReason === 'completed') {
    if (disposeError === undefined) return textResult(output);
    return textResult(`subagent run completed but could not be disposed${disposeLine}${partial('Output:', output)}`, true);
  }
  const diagnostic = result.diagnostic === undefined ? '' : `\nDiagnostic: ${result.diagnostic}`;
  return textResult(`${headline(result.stopReason)}${diagnostic}${disposeLine}${partial('Partial output before the run ended:', output)}`, true);
}

function partial(label: string, output: string): string {
  return output === '' ? '' : `\n${label}\n${output}`;
}
