/** The built-in tools for one child, chosen by the policy. */
import { readFileTool, listDirectoryTool, searchTextTool } from './read-tools.js';
import { runShellTool } from './shell-tool.js';
import type { AgentTool, ToolPolicy } from './tool.js';
import type { Workspace } from '../../workspace/workspace.js';
import { editFileTool, writeFileTool } from './write-tools.js';

/** Every built-in name, enabled or not: a tool filter may name any of them. */
export const BUILTIN_TOOL_NAMES = ['read_file', 'list_directory', 'search_text', 'write_file', 'edit_file', 'run_shell'] as const;

export function workspaceTools(root: Workspace, policy: ToolPolicy, env: Readonly<Record<string, string>>): AgentTool[] {
  const tools = [readFileTool(root), listDirectoryTool(root), searchTextTool(root)];
  if (policy.write) tools.push(writeFileTool(root), editFileTool(root));
  if (policy.shell) tools.push(runShellTool(root, env, policy.shellTimeoutMs, policy.shellNetwork ?? false, policy.shellLauncher));
  return tools;
}
