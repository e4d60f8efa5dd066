/**
 * The daemon's reloadable settings: the config file and the environment file, read at start and
 * again on `subagentd reload` (SIGHUP). A reload applies to new runs: the model (default, endpoint,
 * key) comes from the fresh config and environment, and the ACP providers are re-registered from
 * the fresh config. Running children keep what they started with; the old providers' warm agent
 * processes are stopped and the new providers warm their own, so a changed command, env or `warm`
 * takes effect at once. Settings that only a restart
 * can change (socket, state dir, limits, tools policy, persona, provider modules, tcp) are named
 * in `restartNeeded` when they differ. A config that fails to load leaves the old one in force
 * and the error is returned to the caller (and logged).
 *
 * The environment that counts is the DAEMON's: its own environment at start, overridden by the
 * environment file (`SUBAGENTD_ENV_FILE`, default `<state dir>/daemon.env`, KEY=VALUE lines).
 * Status shows where the model endpoint came from, never a secret.
 */
import { existsSync, readFileSync, parseEnv } from '../../common/node-builtins.js';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { createModelResolver } from '../agent/model/model-resolver.js';
import type { Upstream } from '../upstream/upstream.js';
import { endpointFromEnv } from '../agent/model/endpoint-config.js';
import type { ModelResolver } from '../agent/model/model-adapter.js';
import { loadConfig, type DaemonConfig } from '../config.js';
import type { DaemonProvider } from '../provider.js';
import { createAcpProvider } from '../providers/acp/index.js';
import { AgentGroups, agentGroupsDir } from '../providers/acp/agent-groups.js';
import type { ProviderRegistry } from '../service/provider-registry.js';
import type { SettingsStatus } from '../../protocol/index.js';
import { isoTime } from '../../common/iso-time.js';

const RESTART_ONLY = ['socket', 'stateDir', 'limits', 'tools', 'persona', 'personaVars', 'maxSteps', 'providerModules', 'tcp', 'requireToken', 'maxFrameBytes', 'pollSpinMicros'] as const;

/** Where a provider runs: what the registry should hold for it, and how to take it back. */
export type ProviderPlacement = (provider: DaemonProvider) => { provider: DaemonProvider; release(): void };

export function envFilePath(stateDir: string, env: NodeJS.ProcessEnv): string {
  return env['SUBAGENTD_ENV_FILE'] || join(stateDir, 'daemon.env');
}

function readEnvFile(path: string): Record<string, string> | undefined {
  if (!existsSync(path)) return undefined;
  return parseEnv(readFileSync(path, 'utf8')) as Record<string, string>;
}

export class DaemonSettings {
  private config: DaemonConfig;
  private env: NodeJS.ProcessEnv;
  private resolver: ModelResolver;
  private generation = 0;
  private attempts = 0;
  private lastError: string | undefined;
  private loadedAt = isoTime();
  private envFileLoaded = false;
  private readonly startConfig: DaemonConfig;
  /** The environment file (it may hold API keys: the shell sandbox hides it). */
  readonly envFile: string;
  private unregisterAcp: Array<() => void> = [];
  private acp: DaemonProvider[] = [];
  private registry: ProviderRegistry | undefined;
  private place: ProviderPlacement | undefined;
  /** One record of ACP agents' process groups for every provider generation (see agent-groups.ts). */
  private readonly groups: AgentGroups;

  constructor(
    private readonly configPath: string | undefined,
    config: DaemonConfig,
    stateDir: string,
    private readonly baseEnv: NodeJS.ProcessEnv,
    private readonly log: Logger,
    /** The endpoints' governors, kept across reloads (only their explicit limits follow the config). */
    private readonly upstream?: Upstream,
  ) {
    this.startConfig = config;
    this.config = config;
    this.envFile = envFilePath(stateDir, baseEnv);
    this.groups = new AgentGroups(agentGroupsDir(stateDir), log);
    this.env = this.readEnv();
    this.resolver = this.makeResolver();
  }

  /** For the in-process providers: always the model settings in force now. */
  readonly resolveModel: ModelResolver = (requested) => this.resolver(requested);

  /** The ACP providers of the config in force; with `attach`, kept in step with reloads. */
  acpProviders(): DaemonProvider[] {
    return (this.config.providers ?? []).map((entry) => createAcpProvider(entry, { log: this.log.child({ provider: entry.name }), groups: this.groups }));
  }

  /**
   * Registers the config's ACP providers and re-registers them on every reload. `place` puts
   * each where it runs (a cluster member: in the pool) and gives what the registry holds.
   */
  attach(registry: ProviderRegistry, place?: ProviderPlacement): void {
    this.registry = registry;
    this.place = place;
    this.acp = this.acpProviders();
    this.unregisterAcp = this.acp.map((provider) => this.register(provider));
  }

  private register(provider: DaemonProvider): () => void {
    const placed = this.place?.(provider) ?? { provider, release: () => undefined };
    const unregister = this.registry!.register(placed.provider);
    return () => {
      unregister();
      placed.release();
    };
  }

  reload(): SettingsStatus {
    this.attempts += 1;
    let config: DaemonConfig;
    try {
      config = this.configPath ? loadConfig(this.configPath) : {};
      readEnvFile(this.envFile); // a malformed file fails here, before anything is swapped
    } catch (error) {
      this.lastError = (error as Error).message;
      throw error;
    }
    this.lastError = undefined;
    this.config = config;
    this.env = this.readEnv();
    this.upstream?.configure(config.endpoints);
    this.resolver = this.makeResolver();
    if (this.registry) {
      for (const unregister of this.unregisterAcp) unregister();
      for (const old of this.acp) {
        void old.close?.().catch((error: unknown) => this.log.warn({ err: error, provider: old.name }, 'stopping warm ACP agents failed'));
      }
      this.acp = this.acpProviders();
      this.unregisterAcp = this.acp.map((provider) => this.register(provider));
    }
    this.generation += 1;
    this.loadedAt = isoTime();
    const status = this.status();
    this.log.info({ config: this.configPath, envFile: this.envFile, generation: this.generation, restartNeeded: status.restartNeeded }, 'settings reloaded');
    return status;
  }

  status(): SettingsStatus {
    return {
      ...(this.configPath !== undefined && { path: this.configPath }),
      envFile: this.envFile,
      envFileLoaded: this.envFileLoaded,
      loadedAt: this.loadedAt,
      generation: this.generation,
      reloadAttempts: this.attempts,
      ...(this.lastError !== undefined && { reloadError: this.lastError }),
      model: this.modelSummary(),
      restartNeeded: RESTART_ONLY.filter((key) => JSON.stringify(this.config[key]) !== JSON.stringify(this.startConfig[key])),
      ...(this.acp.length > 0 && { agents: Object.fromEntries(this.acp.flatMap((p) => (p.processes ? [[p.name, p.processes()]] : []))) }),
    };
  }

  private readEnv(): NodeJS.ProcessEnv {
    const file = readEnvFile(this.envFile);
    this.envFileLoaded = file !== undefined;
    return { ...this.baseEnv, ...file };
  }

  private makeResolver(): ModelResolver {
    return createModelResolver(this.config.model, this.env, this.howToSet(), this.upstream);
  }

  /** Appended to every "set this variable" message: which environment counts, and how to change it. */
  private howToSet(): string {
    return ` These are read from the DAEMON's environment, not this shell's: put them in ${this.envFile} (KEY=VALUE lines) and run \`subagentd reload\`, or \`subagentd restart\` from a shell that has them.`;
  }

  private modelSummary(): SettingsStatus['model'] {
    const model = this.config.model ?? {};
    const name = model.default ?? this.env['SUBAGENTD_MODEL'];
    const base = { ...(name !== undefined && { default: name }) };
    try {
      const endpoint = endpointFromEnv(this.env, { baseUrl: model.baseUrl, apiKey: model.apiKeyEnv ? this.env[model.apiKeyEnv] : undefined, model: name });
      if (!endpoint) return { ...base, apiKey: 'unset' };
      return { ...base, endpoint: endpoint.baseUrl, model: endpoint.model, apiKey: endpoint.apiKey ? 'set' : 'unset' };
    } catch (error) {
      return { ...base, apiKey: 'unset', problem: (error as Error).message };
    }
  }
}
