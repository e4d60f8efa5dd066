/**
 * The parts of deepseek-harness this bridge touches, written structurally: the harness packages are
 * not dependencies of subagentd (a harness brings its own), so nothing here imports them. The
 * shapes follow `@deepseek-ai/dsh-subagent` 0.1.0-rc.8 and `@deepseek-ai/cordis` 4.
 */
import type { ContentBlock, SubagentCapabilities } from '../protocol/index.js';
import type { HarnessAgentLike } from '../client/index.js';

/** The harness's CLOSED stop-reason union (subagentd's is open: see stop-reason.ts). */
export type HarnessStopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal';

export interface HarnessResult {
  readonly output: ContentBlock[];
  readonly structured?: unknown;
  readonly diagnostic?: string;
  readonly stopReason: HarnessStopReason;
}

export interface HarnessRun {
  readonly id: string;
  /** Always undefined: the child lives in the daemon, not in this process. */
  readonly localAgent: undefined;
  readonly result: Promise<HarnessResult>;
  dispose(): Promise<void>;
}

/** The harness's start request; fields beyond these may appear in later versions. */
export interface HarnessStartRequest {
  readonly label?: string;
  readonly prompt: ContentBlock[];
  readonly parent: HarnessAgentLike;
  readonly signal: AbortSignal;
  readonly agentOptions?: unknown;
  readonly outputSchema?: Record<string, unknown>;
  readonly maxDepth?: number;
  readonly toolFilter?: { readonly allow?: string[]; readonly deny?: string[] };
  readonly persona?: string;
  /** W3C trace context of the harness's turn, should a harness carry one (none does in 0.1.0-rc.8). */
  readonly traceparent?: string;
  readonly [field: string]: unknown;
}

export interface HarnessProvider {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  readonly inheritsParentContext: boolean;
  start(request: HarnessStartRequest): Promise<HarnessRun>;
}

export interface HarnessLogger {
  error(format: unknown, ...args: unknown[]): void;
  warn(format: unknown, ...args: unknown[]): void;
  info(format: unknown, ...args: unknown[]): void;
  debug(format: unknown, ...args: unknown[]): void;
}

/** The Cordis context a plugin's `apply` receives, as far as the bridge uses it. */
export interface HarnessContext {
  readonly subagents: { registerProvider(provider: HarnessProvider): () => void };
  logger(name: string): HarnessLogger;
  effect(execute: () => () => void | Promise<void>, label?: string): unknown;
}
