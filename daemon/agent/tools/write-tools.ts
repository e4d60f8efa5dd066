/** Workspace tools that change files; offered only when the policy enables writing. */
import { constants } from 'node:fs';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { textOutcome, type AgentTool } from './tool.js';
import type { WorkspaceRoot } from './workspace-root.js';

export function writeFileTool(root: WorkspaceRoot): AgentTool {
  return {
    name: 'write_file',
    description: 'Create or overwrite a file in the workspace with the given text. Missing parent folders are created.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', minLength: 1 }, content: { type: 'string' } },
      required: ['path', 'content'],
      additionalProperties: false,
    },
    async execute(args) {
      const { path, content } = args as { path: string; content: string };
      const target = await root.writable(path);
      await mkdir(dirname(target), { recursive: true });
      await writeNoFollow(target, content);
      return textOutcome(`wrote ${Buffer.byteLength(content)} bytes to ${root.display(target)}`);
    },
  };
}

export function editFileTool(root: WorkspaceRoot): AgentTool {
  return {
    name: 'edit_file',
    description:
      'Replace text in an existing workspace file. oldText must occur exactly once unless replaceAll is true.',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', minLength: 1 },
        oldText: { type: 'string', minLength: 1 },
        newText: { type: 'string' },
        replaceAll: { type: 'boolean' },
      },
      required: ['path', 'oldText', 'newText'],
      additionalProperties: false,
    },
    async execute(args) {
      const { path, oldText, newText, replaceAll = false } = args as {
        path: string;
        oldText: string;
        newText: string;
        replaceAll?: boolean;
      };
      const target = await root.existing(path);
      if (!(await stat(target)).isFile()) return textOutcome(`${path} is not a file`, true);
      const text = await readFile(target, 'utf8');
      const occurrences = text.split(oldText).length - 1;
      if (occurrences === 0) return textOutcome(`oldText was not found in ${path}; nothing changed`, true);
      if (occurrences > 1 && !replaceAll) {
        return textOutcome(`oldText occurs ${occurrences} times in ${path}; make it unique or pass replaceAll`, true);
      }
      await writeNoFollow(target, text.split(oldText).join(newText));
      return textOutcome(`replaced ${occurrences} occurrence(s) in ${root.display(target)}`);
    },
  };
}

/** `target` is already a real path; O_NOFOLLOW refuses a symlink swapped in since the check. */
async function writeNoFollow(target: string, content: string): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const handle = await open(target, flags, 0o644);
  try {
    await handle.writeFile(content, 'utf8');
  } finally {
    await handle.close();
  }
}
