/**
 * What an in-process child needs once one runs: the agent loop, its tools and the workspace
 * (about 20 modules). in-process-provider.ts imports this module at the first start or restore,
 * not when the provider is made, so a daemon that has run no in-process child does not hold them
 * (about 0.8 MiB of an idle daemon's RSS). Nothing here runs at import.
 */
export { DEFAULT_MAX_STEPS } from '../../agent/agent-loop.js';
export { ChildAgent } from '../../agent/child-agent.js';
export { reportTool } from '../../agent/tools/report-tool.js';
export { InProcessRun, RestoredRun } from './in-process-run.js';
export { prepareChild } from './prepare-child.js';
export { restoreChild } from './restore-child.js';
