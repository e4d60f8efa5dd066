/** The providers every daemon registers: spawn and fork (in-process), and each ACP agent in the config. */
import type { Logger } from 'pino';
import type { ModelResolver } from './agent/model/model-adapter.js';
import { createModelResolver } from './agent/model/model-resolver.js';
import type { DaemonConfig } from './config.js';
import { stateFiles } from './ops/paths.js';
import type { DaemonProvider } from './provider.js';
import type { Delegation } from './service/delegation.js';
import type { ShellLauncher } from './sandbox/shell-launcher.js';
import { createAcpProvider } from './providers/acp/index.js';
import { AgentGroups, agentGroupsDir } from './providers/acp/agent-groups.js';
import { createForkProvider, createSpawnProvider, type InProcessProviderOptions } from './providers/in-process/index.js';

export function createBuiltinProviders(
  config: DaemonConfig,
  stateDir: string,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
  /** The model resolver in force (a reloadable daemon passes its own; see reload.ts). */
  resolveModel: ModelResolver = createModelResolver(config.model, env),
  delegation?: Delegation,
  /** How `run_shell` starts commands, chosen at daemon start (sandbox/shell-launcher.ts); default: the sandbox, probed lazily. */
  shellLauncher?: ShellLauncher,
): DaemonProvider[] {
  const inProcess: InProcessProviderOptions = {
    sessionsDir: stateFiles(stateDir).sessions,
    resolveModel,
    policy: {
      write: config.tools?.write ?? false,
      shell: config.tools?.shell ?? false,
      ...(config.tools?.shellTimeoutMs !== undefined && { shellTimeoutMs: config.tools.shellTimeoutMs }),
      ...(config.tools?.shellNetwork !== undefined && { shellNetwork: config.tools.shellNetwork }),
      ...(shellLauncher && { shellLauncher }),
    },
    log,
    ...(config.persona !== undefined && { defaultPersona: config.persona }),
    ...(config.personaVars !== undefined && { personaVars: config.personaVars }),
    ...(config.maxSteps !== undefined && { maxSteps: config.maxSteps }),
    ...(delegation && { delegationTools: (provider: string, parent) => delegation.toolsFor(provider, parent) }),
  };
  const groups = new AgentGroups(agentGroupsDir(stateDir), log);
  const acp = (config.providers ?? []).map((entry) => createAcpProvider(entry, { log: log.child({ provider: entry.name }), groups }));
  return [createSpawnProvider(inProcess), createForkProvider(inProcess), ...acp];
}
