export { createSpawnProvider } from './spawn-provider.js';
export { createForkProvider } from './fork-provider.js';
export type { InProcessProvider } from './in-process-provider.js';
export type { InProcessProviderOptions } from './in-process-options.js';
export type { InProcessRun, ResumeOptions } from './in-process-run.js';
export type { ToolPolicy } from '../../agent/tools/tool.js';
