/**
 * MCP wants bad tool input as a protocol error (`InvalidParams`), where the tools themselves
 * answer it with an `isError` result a model can read. This checks arguments against the tool's
 * own input schema first and names the offending field; the rules stay the tool's.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

const ajv = new Ajv({ strict: false, allErrors: false });
const compiled = new WeakMap<object, ValidateFunction>();

function fieldOf(error: ErrorObject): string {
  const params = error.params as { missingProperty?: string; additionalProperty?: string };
  const path = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
  return params.missingProperty ?? params.additionalProperty ?? (path || '(arguments)');
}

/** Throws `InvalidParams` naming the first field that breaks `schema`. */
export function checkToolInput(tool: string, schema: Readonly<Record<string, unknown>>, args: unknown): void {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (validate(args)) return;
  const error = validate.errors?.[0];
  if (!error) throw new McpError(ErrorCode.InvalidParams, `${tool}: invalid arguments`);
  const field = fieldOf(error);
  const rule = error.keyword === 'additionalProperties' ? 'is not a parameter of this tool' : error.keyword === 'required' ? 'is required' : (error.message ?? 'is invalid');
  throw new McpError(ErrorCode.InvalidParams, `${tool}: "${field}" ${rule}`, { field });
}
