/**
 * The tools one child sees, and the single place a model's tool call is turned into a result.
 * Every failure on the way (unknown or filtered tool, arguments that are not JSON or fail the
 * schema, a tool that throws) becomes an `isError` result the model can read: a run never
 * crashes on a tool.
 */
import type { Ajv, ValidateFunction } from 'ajv';
import type { ToolCall } from '../../../protocol/index.js';
import { newAjv } from '../../../protocol/validation.js';
import type { ToolSpec } from '../model/model-adapter.js';
import { textOutcome, type AgentTool, type ToolContext, type ToolOutcome } from './tool.js';

export class ToolSchemaError extends Error {
  override readonly name = 'ToolSchemaError';
  constructor(readonly toolName: string, problem: string) {
    super(`tool "${toolName}" has an invalid parameter schema: ${problem}`);
  }
}

export interface ToolRegistryOptions {
  /** Which tools the model may see and call (the tool filter). Default: all. */
  readonly visible?: (name: string) => boolean;
  /** Tools that bypass `visible` (the run's own capture tool). */
  readonly alwaysVisible?: readonly string[];
  /** When this returns a reason, every call is refused with it (e.g. after structured capture). */
  readonly refusal?: () => string | undefined;
}

interface Entry {
  readonly tool: AgentTool;
  readonly validate: ValidateFunction;
}

export class ToolRegistry {
  private readonly entries = new Map<string, Entry>();

  /** Compiles every schema up front; throws ToolSchemaError for one Ajv cannot compile. */
  constructor(
    tools: readonly AgentTool[],
    private readonly options: ToolRegistryOptions = {},
  ) {
    for (const tool of tools) {
      if (this.entries.has(tool.name)) throw new ToolSchemaError(tool.name, 'the name is declared twice');
      let validate: ValidateFunction;
      try {
        validate = compileCached(tool.parameters);
      } catch (error) {
        throw new ToolSchemaError(tool.name, (error as Error).message);
      }
      this.entries.set(tool.name, { tool, validate });
    }
  }

  /** What the model is offered. */
  specs(): ToolSpec[] {
    return [...this.entries.values()]
      .filter(({ tool }) => this.isVisible(tool.name))
      .map(({ tool }) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }));
  }

  async invoke(call: ToolCall, ctx: ToolContext): Promise<ToolOutcome> {
    const refused = this.options.refusal?.();
    if (refused !== undefined) return textOutcome(refused, true);
    const entry = this.entries.get(call.name);
    if (!entry || !this.isVisible(call.name)) {
      const offered = this.specs().map((spec) => spec.name);
      return textOutcome(`Tool "${call.name}" is not available. Available tools: ${offered.join(', ') || 'none'}.`, true);
    }
    let args: unknown;
    try {
      // Some models send an empty string for a call without arguments.
      args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
    } catch (error) {
      return textOutcome(`The arguments of ${call.name} are not valid JSON: ${(error as Error).message}`, true);
    }
    if (!entry.validate(args)) {
      const why = sharedAjv().errorsText(entry.validate.errors, { dataVar: 'arguments', separator: '; ' });
      return textOutcome(`Invalid arguments for ${call.name}: ${why}`, true);
    }
    try {
      return await entry.tool.execute(args, ctx);
    } catch (error) {
      return textOutcome(`${call.name} failed: ${error instanceof Error ? error.message : String(error)}`, true);
    }
  }

  private isVisible(name: string): boolean {
    if (this.options.alwaysVisible?.includes(name)) return true;
    return this.options.visible?.(name) ?? true;
  }
}

/**
 * One Ajv for every child, with compiled validators cached by the schema's text: children of
 * one daemon mostly share their tools' schemas, and compiling them per child cost ~12 ms of CPU
 * per start. The cache is bounded and evicts from Ajv too, so a long-lived daemon does not
 * accumulate every client's schemas. Formats are not validated (no format plugin is a dependency).
 * Made when the first child's tools are compiled, so an idle daemon has not loaded Ajv.
 */
let ajv: Ajv | undefined;
const sharedAjv = (): Ajv => (ajv ??= newAjv({ allErrors: true, strict: false, validateFormats: false, logger: false }));
const compiled = new Map<string, { schema: object; validate: ValidateFunction }>();
const MAX_CACHED_SCHEMAS = 512;

function compileCached(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  const hit = compiled.get(key);
  if (hit) {
    compiled.delete(key);
    compiled.set(key, hit); // most recently used last
    return hit.validate;
  }
  const copy = structuredClone(schema);
  const validate = sharedAjv().compile(copy);
  compiled.set(key, { schema: copy, validate });
  if (compiled.size > MAX_CACHED_SCHEMAS) {
    const [oldestKey, oldest] = compiled.entries().next().value as [string, { schema: object }];
    compiled.delete(oldestKey);
    sharedAjv().removeSchema(oldest.schema);
  }
  return validate;
}
