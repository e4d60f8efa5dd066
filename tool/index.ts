/** The model-facing subagent tool and the control tools, over any service of the seam's shape. */
export { createSubagentTool } from './subagent-tool.js';
export type { SubagentToolChange, SubagentToolHandle, SubagentToolOptions } from './subagent-tool.js';
export { DEFAULT_MAX_DEPTH, DEFAULT_TOOL_NAME, resolveToolConfig } from './config.js';
export type { BackgroundMode, ResolvedToolConfig, SubagentToolConfig } from './config.js';
export { BackgroundJobs, JOB_KILL_TOOL, JOB_OUTPUT_TOOL } from './background-jobs.js';
export type { JobSnapshot, JobState } from './background-jobs.js';
export { createChildControlTools, formatListing } from './child-control-tools.js';
export type { ChildControlOptions, ChildControlTools } from './child-control-tools.js';
export { headline, worktreeNote } from './run-outcome.js';
export { settlementMessage } from './settlement-notice.js';
export type { ToolProvider, ToolService, ToolStartRequest } from './service-shape.js';
export type { ToolCallContext, ToolDefinition, ToolResult } from './tool-definition.js';
