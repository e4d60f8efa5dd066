/**
 * Structured output for agents we cannot give a capture tool: the prompt asks for one JSON
 * object as the final message, and that message is parsed and validated with ajv. A final
 * message that is not valid JSON for the schema fails the run; there is no re-prompt.
 */
import type { ValidateFunction } from 'ajv';
import { SubagentError, boundDiagnostic, describeAjvErrors, type ObjectJsonSchema } from '../../../protocol/index.js';
import { newAjv } from '../../../protocol/validation.js';

export type StructuredCheck = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly diagnostic: string };

export interface StructuredOutput {
  /** Appended to every prompt of the run chain as its own text block. */
  readonly instruction: string;
  check(finalText: string): StructuredCheck;
}

/** A whole-message Markdown fence around the JSON, which models add despite being asked not to. */
const FENCED = /^```(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/i;

export function compileStructuredOutput(schema: ObjectJsonSchema): StructuredOutput {
  let validate: ValidateFunction;
  try {
    // One Ajv per schema: a shared instance would cache every client's schema for the daemon's life.
    validate = newAjv({ allErrors: true, strict: false, allowUnionTypes: true }).compile(schema);
  } catch (error) {
    throw new SubagentError('UNSUPPORTED_SCHEMA', `output schema does not compile: ${error instanceof Error ? error.message : String(error)}`);
  }
  const instruction = [
    'When you have finished, your final message must be exactly one JSON object that satisfies the JSON Schema below,',
    'with no other text, commentary or code fences before or after it.',
    '',
    'JSON Schema:',
    JSON.stringify(schema, null, 2),
  ].join('\n');

  return {
    instruction,
    check(finalText) {
      const trimmed = finalText.trim();
      const body = FENCED.exec(trimmed)?.[1] ?? trimmed;
      let value: unknown;
      try {
        value = JSON.parse(body);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        return { ok: false, diagnostic: boundDiagnostic(`final message is not valid JSON (${reason})`) };
      }
      if (!validate(value)) {
        return { ok: false, diagnostic: boundDiagnostic(`final message does not match the output schema: ${describeAjvErrors(validate.errors)}`) };
      }
      return { ok: true, value };
    },
  };
}
