/**
 * Trusted provider modules named in the config file. A module exports
 * `createProviders(context)` returning (a promise of) daemon providers.
 */
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { ConfigError, type DaemonConfig } from './config.js';
import type { DaemonProvider } from './provider.js';

export interface ProviderModuleContext {
  readonly stateDir: string;
  readonly config: DaemonConfig;
  readonly log: Logger;
}

export async function loadProviderModules(paths: readonly string[], context: ProviderModuleContext): Promise<DaemonProvider[]> {
  const providers: DaemonProvider[] = [];
  for (const path of paths) {
    let mod: { createProviders?: unknown };
    try {
      mod = (await import(pathToFileURL(path).href)) as { createProviders?: unknown };
    } catch (error) {
      throw new ConfigError(`provider module ${path} could not be loaded: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (typeof mod.createProviders !== 'function') {
      throw new ConfigError(`provider module ${path} must export a function createProviders(context)`);
    }
    const created = (await mod.createProviders(context)) as unknown;
    if (!Array.isArray(created)) throw new ConfigError(`createProviders in ${path} must return an array of providers`);
    providers.push(...(created as DaemonProvider[]));
  }
  return providers;
}
