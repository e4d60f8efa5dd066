/** What a tool is to the child-agent runtime, and the policy that enables the risky ones. */
import type { ContentBlock } from '../../../protocol/index.js';

export interface ToolContext {
  readonly callId: string;
  /** Aborted when the run is cancelled; long-running tools must stop on it. */
  readonly signal: AbortSignal;
}

export interface ToolOutcome {
  readonly content: ContentBlock[];
  readonly isError: boolean;
}

export interface AgentTool {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments; the registry validates every call against it before `execute`. */
  readonly parameters: Record<string, unknown>;
  execute(args: unknown, ctx: ToolContext): Promise<ToolOutcome>;
}

import type { ShellLauncher } from '../../sandbox/shell-launcher.js';

/** Which built-in workspace tools may change the world. Both default to off. */
export interface ToolPolicy {
  readonly write: boolean;
  readonly shell: boolean;
  /** Upper bound on one `run_shell` command (default 60 s). */
  readonly shellTimeoutMs?: number;
  /** Whether a sandboxed `run_shell` may use the network (default: no network). */
  readonly shellNetwork?: boolean;
  /** How commands start (daemon/sandbox/shell-launcher.ts); default: the sandbox, bwrap probed at first use. */
  readonly shellLauncher?: ShellLauncher;
}

export function textOutcome(text: string, isError = false): ToolOutcome {
  return { content: [{ type: 'text', text }], isError };
}
