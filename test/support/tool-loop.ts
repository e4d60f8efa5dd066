/**
 * A scripted parent model for the tool tests: each step of the script is the batch of tool calls
 * the "model" makes in one turn (run concurrently, as a harness runs parallel calls), computed
 * from the transcript so far, so a later step can use an id an earlier result returned. The tools
 * offered are read anew at every step, as a harness re-reads its tool list per model request.
 */
import type { ToolCallContext, ToolDefinition, ToolResult } from '../../tool/index.js';

export interface ScriptedCall {
  readonly name: string;
  readonly input: unknown;
  /** Overrides the loop's context for this call (a signal of its own, no parent, …). */
  readonly context?: ToolCallContext;
}

export interface TranscriptEntry {
  readonly call: ScriptedCall;
  readonly result: ToolResult;
  readonly text: string;
}

export type ScriptStep = readonly ScriptedCall[] | ((transcript: readonly TranscriptEntry[]) => readonly ScriptedCall[]);

export async function runParentLoop(
  offered: () => readonly ToolDefinition[],
  script: readonly ScriptStep[],
  context: ToolCallContext,
): Promise<TranscriptEntry[]> {
  const transcript: TranscriptEntry[] = [];
  for (const step of script) {
    const calls = typeof step === 'function' ? step(transcript) : step;
    const tools = new Map(offered().map((tool) => [tool.name, tool]));
    const results = await Promise.all(
      calls.map(async (call): Promise<ToolResult> => {
        const tool = tools.get(call.name);
        if (!tool) return { content: [{ type: 'text', text: `no tool named ${call.name}` }], isError: true };
        return tool.execute(call.input, call.context ?? context);
      }),
    );
    calls.forEach((call, index) => {
      const result = results[index]!;
      transcript.push({ call, result, text: result.content.map((b) => (b.type === 'text' ? b.text : '')).join('') });
    });
  }
  return transcript;
}

/** The text of the one call a single-call script made. */
export async function callOnce(tool: ToolDefinition, input: unknown, context: ToolCallContext): Promise<TranscriptEntry> {
  const [entry] = await runParentLoop(() => [tool], [[{ name: tool.name, input }]], context);
  return entry!;
}
