/** The `acp` provider: children as external Agent Client Protocol agent processes. */
export { createAcpProvider, type AcpProviderDeps } from './acp-provider.js';
export type { AcpResumeOptions, AcpRun } from './acp-run.js';
export { ACP_DEFAULTS, resolveAcpConfig, type AcpPermissionPolicy, type AcpProviderConfig } from './config.js';
