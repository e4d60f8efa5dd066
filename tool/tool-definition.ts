/**
 * The framework-neutral tool shape every tool of this folder returns: a name, the wording the
 * model reads, a JSON Schema of its input, and `execute`. `execute` never throws: bad input and
 * failures come back as `isError` results, because a model can only read results.
 */
import type { ContentBlock } from '../protocol/index.js';

export interface ToolResult {
  readonly content: ContentBlock[];
  readonly isError: boolean;
}

export interface ToolCallContext<Parent = unknown> {
  /** The tool call's abort signal: cancels what the call waits for. */
  readonly signal?: AbortSignal;
  /** The calling agent; a tool that starts or addresses children needs it. */
  readonly parent?: Parent;
}

export interface ToolDefinition<Parent = unknown> {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
  execute(input: unknown, context: ToolCallContext<Parent>): Promise<ToolResult>;
}

export function textResult(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

/** The text blocks of some content, concatenated. */
export function textOf(content: readonly ContentBlock[]): string {
  return content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The refusal for a call that has no calling agent to attach children to. */
export function needsParent(toolName: string): ToolResult {
  return textResult(`${toolName} requires a calling agent (the tool call's context has no parent)`, true);
}
