/**
 * The subagent tool's configuration and its validation. Every key is checked when the tool is
 * configured (createSubagentTool throws a SubagentError INVALID_REQUEST naming the field); what
 * depends on the provider (depth cap, continuable children) is checked at mount instead.
 */
import { SubagentError, depthProblem, type AgentOptions, type ToolFilter } from '../protocol/index.js';

export type BackgroundMode = 'one-shot' | 'continuable';

export interface SubagentToolConfig {
  /** The provider's name in the service's registry. */
  readonly provider: string;
  /** Default `subagent`; two instances bound to two providers need two names. */
  readonly toolName?: string;
  /** Default true; false removes `run_in_background` and refuses it when forced. */
  readonly enableRunInBackground?: boolean;
  /** Default `one-shot`. */
  readonly backgroundMode?: BackgroundMode;
  /** Copied to every request; omitted when not given. */
  readonly agentOptions?: AgentOptions;
  readonly persona?: string;
  readonly toolFilter?: ToolFilter;
  /** Default 3: an absolute cap on the child's depth; `'provider-managed'` sends no cap. */
  readonly maxDepth?: number | 'provider-managed';
  /** `worktree`: every child works in its own git worktree and branch (daemon providers); default none sent. */
  readonly isolation?: 'none' | 'worktree';
}

export interface ResolvedToolConfig {
  readonly provider: string;
  readonly toolName: string;
  readonly enableRunInBackground: boolean;
  readonly backgroundMode: BackgroundMode;
  readonly agentOptions?: AgentOptions;
  readonly persona?: string;
  readonly toolFilter?: ToolFilter;
  /** Undefined for `'provider-managed'`. */
  readonly maxDepth?: number;
  readonly isolation?: 'none' | 'worktree';
}

export const DEFAULT_TOOL_NAME = 'subagent';
export const DEFAULT_MAX_DEPTH = 3;
/** What model APIs accept as a function name. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const KEYS = new Set(['provider', 'toolName', 'enableRunInBackground', 'backgroundMode', 'agentOptions', 'persona', 'toolFilter', 'maxDepth', 'isolation']);

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function invalid(field: string, message: string): SubagentError {
  return new SubagentError('INVALID_REQUEST', message, { field: `/${field}` });
}

export function resolveToolConfig(config: SubagentToolConfig): ResolvedToolConfig {
  if (typeof config !== 'object' || config === null) throw invalid('', 'the subagent tool needs a config object');
  for (const key of Object.keys(config)) {
    if (!KEYS.has(key)) throw invalid(key, `unknown subagent tool config key '${key}' (known: ${[...KEYS].join(', ')})`);
  }
  const { provider, toolName = DEFAULT_TOOL_NAME, enableRunInBackground = true, backgroundMode = 'one-shot' } = config;
  if (typeof provider !== 'string' || provider === '') throw invalid('provider', 'provider must be the non-empty name of a registered provider');
  if (typeof toolName !== 'string' || !TOOL_NAME.test(toolName)) {
    throw invalid('toolName', 'toolName must be 1-64 letters, digits, underscores or hyphens');
  }
  if (typeof enableRunInBackground !== 'boolean') throw invalid('enableRunInBackground', 'enableRunInBackground must be a boolean');
  if (backgroundMode !== 'one-shot' && backgroundMode !== 'continuable') {
    throw invalid('backgroundMode', "backgroundMode must be 'one-shot' or 'continuable'");
  }
  if (backgroundMode === 'continuable' && !enableRunInBackground) {
    throw invalid('backgroundMode', "backgroundMode 'continuable' runs children in the background, so it needs enableRunInBackground: true");
  }
  const resolved: Mutable<ResolvedToolConfig> = { provider, toolName, enableRunInBackground, backgroundMode };
  if (config.agentOptions !== undefined) {
    if (!isPlainObject(config.agentOptions)) throw invalid('agentOptions', 'agentOptions must be an object');
    resolved.agentOptions = config.agentOptions;
  }
  if (config.persona !== undefined) {
    if (typeof config.persona !== 'string') throw invalid('persona', 'persona must be a string');
    resolved.persona = config.persona;
  }
  if (config.toolFilter !== undefined) resolved.toolFilter = checkToolFilter(config.toolFilter);
  if (config.isolation !== undefined) {
    if (config.isolation !== 'none' && config.isolation !== 'worktree') throw invalid('isolation', "isolation must be 'none' or 'worktree'");
    resolved.isolation = config.isolation;
  }
  const maxDepth = config.maxDepth === undefined ? DEFAULT_MAX_DEPTH : config.maxDepth;
  if (maxDepth !== 'provider-managed') {
    if (!isDepth(maxDepth)) throw invalid('maxDepth', 'maxDepth must be a non-negative safe integer');
    resolved.maxDepth = maxDepth;
  }
  return resolved;
}

/** A non-negative safe integer, -0 refused: the seam's one rule (protocol/depth.ts). */
function isDepth(value: unknown): value is number {
  return depthProblem(value, '/maxDepth') === undefined;
}

function checkToolFilter(filter: unknown): ToolFilter {
  if (!isPlainObject(filter)) throw invalid('toolFilter', 'toolFilter must be an object with allow or deny');
  const hasAllow = 'allow' in filter;
  const hasDeny = 'deny' in filter;
  if (hasAllow === hasDeny) throw invalid('toolFilter', 'toolFilter must have exactly one of allow or deny');
  const list: unknown = hasAllow ? filter['allow'] : filter['deny'];
  if (!Array.isArray(list) || !list.every((name) => typeof name === 'string')) {
    throw invalid(`toolFilter/${hasAllow ? 'allow' : 'deny'}`, 'toolFilter lists must be arrays of tool names');
  }
  return filter as ToolFilter;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
