/**
 * The `structured_output` capture tool of a child started with an output schema. Its
 * parameters ARE the schema, so the registry's validation is the schema check and a bad call is
 * an error result the model can retry within the turn. The first valid call captures the value;
 * from then on every tool call is refused and the loop ends the turn without another model step.
 * The capture belongs to one run: a resumed child must deliver a fresh value.
 */
import type { ObjectJsonSchema } from '../../../protocol/index.js';
import { textOutcome, type AgentTool } from './tool.js';

export const STRUCTURED_OUTPUT_TOOL = 'structured_output';

export const STRUCTURED_OUTPUT_INSTRUCTION = [
  `When the task is done, deliver the result by calling the \`${STRUCTURED_OUTPUT_TOOL}\` tool exactly once;`,
  'its arguments are the result and must match its parameter schema. A plain-text answer does not count.',
  'If the call is rejected, fix the arguments and call it again. After a successful call, stop.',
].join(' ');

export class StructuredCapture {
  private value: { readonly data: unknown } | undefined;

  constructor(readonly schema: ObjectJsonSchema) {}

  get captured(): boolean {
    return this.value !== undefined;
  }

  /** The captured value (undefined when none). */
  get data(): unknown {
    return this.value?.data;
  }

  reset(): void {
    this.value = undefined;
  }

  /** Why a call is refused now, if it is. */
  refusal(): string | undefined {
    return this.captured
      ? `Refused: the structured result was already delivered with ${STRUCTURED_OUTPUT_TOOL}; no further tool calls run.`
      : undefined;
  }

  tool(): AgentTool {
    return {
      name: STRUCTURED_OUTPUT_TOOL,
      description: 'Deliver the final structured result of the task. Call once, when done.',
      parameters: this.schema as Record<string, unknown>,
      execute: async (args) => {
        this.value = { data: structuredClone(args) };
        return textOutcome('Structured result recorded.');
      },
    };
  }
}
