/**
 * The daemon as a library: embed it (`createDaemon`) with trusted same-process providers, or
 * build providers of your own against the daemon's provider seam.
 */
export { createDaemon, type Daemon, type DaemonOptions } from './daemon.js';
export type { DaemonProvider, DaemonRun, ProviderStartRequest, RestoreContext, RunHost } from './provider.js';
export { describeProvider } from './provider.js';
export { createBuiltinProviders } from './builtin-providers.js';
export { createSpawnProvider, createForkProvider, type InProcessProviderOptions } from './providers/in-process/index.js';
export { createAcpProvider, type AcpProviderConfig } from './providers/acp/index.js';
export { createModelResolver } from './agent/model/model-resolver.js';
export { loadConfig, parseConfig, ConfigError, type DaemonConfig } from './config.js';
export { createLogger } from './ops/logger.js';
export type { ModelAdapter, ModelResolver, ModelStep, ModelStepRequest } from './agent/model/model-adapter.js';
