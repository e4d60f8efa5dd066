/**
 * MCP wants bad tool input as a protocol error (`InvalidParams`), where the tools themselves
 * answer it with an `isError` result a model can read. This checks arguments against the tool's
 * own input schema first and names the offending field; the rules stay the tool's.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { describeAjvError } from '../../protocol/index.js';

const ajv = new Ajv({ strict: false, allErrors: false });
const compiled = new WeakMap<object, ValidateFunction>();

/** MCP names a field as a dotted path (`a.b`), the arguments themselves as `(arguments)`. */
const dotted = (pointer: string): string => pointer.replace(/^\//, '').replaceAll('/', '.') || '(arguments)';

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
  const failure = describeAjvError(error, { unknownKey: 'is not a parameter of this tool' });
  const field = dotted(failure.field);
  throw new McpError(ErrorCode.InvalidParams, `${tool}: "${field}" ${failure.reason}`, { field });
}
