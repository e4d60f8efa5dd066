/**
 * `subagentd/harness`: a Cordis plugin for deepseek-harness that puts the daemon's providers into
 * `ctx.subagents`. Load it beside the harness's own `tool-subagent` plugin; the harness tool
 * then delegates to the shared pool. Use the tool's `backgroundMode: 'one-shot'`: the harness's
 * continuable mode keeps the child in the harness process (`prepareContinuable`), which a
 * daemon-hosted child cannot be.
 *
 * Config: `{ socket?, providers?: { harnessName: daemonProviderName }, agentOptions?, autoStart?, isolation? }`
 * (`isolation: 'worktree'`: each child works in its own git worktree and branch).
 */
import { SubagentError, type AgentOptions } from '../protocol/index.js';
import { defaultSocketPath } from '../client/index.js';
import { DaemonBridge } from './bridge.js';
import type { HarnessContext } from './harness-types.js';

export interface Config {
  readonly socket?: string;
  readonly providers?: Readonly<Record<string, string>>;
  /** The children's model: `{ provider?, model?, maxTokens? }`, sent with every start. */
  readonly agentOptions?: AgentOptions;
  /** Start the shared daemon when nothing answers at the socket (default true). */
  readonly autoStart?: boolean;
  /** `worktree`: each child works in its own git worktree and branch of the parent's repository. */
  readonly isolation?: 'none' | 'worktree';
}

export const name = 'subagentd';
export const inject = ['subagents'];

export async function apply(ctx: HarnessContext, config: Config = {}): Promise<void> {
  checkConfig(config);
  const bridge = new DaemonBridge(ctx, {
    socket: config.socket ?? defaultSocketPath(),
    ...(config.providers !== undefined && { providers: config.providers }),
    ...(config.agentOptions !== undefined && { agentOptions: config.agentOptions }),
    autoStart: config.autoStart !== false,
    ...(config.isolation !== undefined && { isolation: config.isolation }),
  });
  ctx.effect(() => () => bridge.close(), 'subagentd bridge');
  await bridge.open();
}

function checkConfig(config: Config): void {
  const bad = (field: string, rule: string): never => {
    throw new SubagentError('INVALID_REQUEST', `subagentd harness plugin: ${field} ${rule}`, { field });
  };
  if (config.socket !== undefined && (typeof config.socket !== 'string' || config.socket === '')) bad('socket', 'must be a non-empty path');
  if (config.providers !== undefined) {
    if (typeof config.providers !== 'object' || config.providers === null) bad('providers', 'must map harness names to daemon provider names');
    for (const [key, value] of Object.entries(config.providers)) {
      if (typeof value !== 'string' || value === '') bad(`providers.${key}`, 'must name a daemon provider');
    }
  }
  if (config.autoStart !== undefined && typeof config.autoStart !== 'boolean') bad('autoStart', 'must be true or false');
  if (config.isolation !== undefined && config.isolation !== 'none' && config.isolation !== 'worktree') bad('isolation', "must be 'none' or 'worktree'");
  if (config.agentOptions !== undefined && (typeof config.agentOptions !== 'object' || config.agentOptions === null)) {
    bad('agentOptions', 'must be an object');
  }
}

export type { HarnessContext, HarnessProvider, HarnessRun, HarnessStartRequest, HarnessStopReason } from './harness-types.js';
export { toHarnessResult } from './stop-reason.js';

export default { name, inject, apply };
