/**
 * Workspace tools that change files; offered only when the policy enables writing. The
 * workspace opens and checks the file first (inside, regular, one hard link); only then is it
 * emptied and written.
 */
import { withFile, type Workspace } from '../../workspace/workspace.js';
import { textOutcome, type AgentTool, type ToolOutcome } from './tool.js';

/** Files edit_file will load whole. */
const MAX_EDIT_BYTES = 8 * 1024 * 1024;

export function writeFileTool(root: Workspace): AgentTool {
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
      const real = await withFile(root, path, 'create', async (file) => {
        await file.replace(content);
        return file.real;
      });
      return textOutcome(`wrote ${Buffer.byteLength(content)} bytes to ${root.display(real)}`);
    },
  };
}

export function editFileTool(root: Workspace): AgentTool {
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
      return withFile(root, path, 'update', async (file): Promise<ToolOutcome> => {
        const text = await file.readText(MAX_EDIT_BYTES, path);
        const occurrences = text.split(oldText).length - 1;
        if (occurrences === 0) return textOutcome(`oldText was not found in ${path}; nothing changed`, true);
        if (occurrences > 1 && !replaceAll) {
          return textOutcome(`oldText occurs ${occurrences} times in ${path}; make it unique or pass replaceAll`, true);
        }
        await file.replace(text.split(oldText).join(newText));
        return textOutcome(`replaced ${occurrences} occurrence(s) in ${root.display(file.real)}`);
      });
    },
  };
}
