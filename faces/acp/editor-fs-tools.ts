/**
 * When the editor offers `fs/read_text_file` / `fs/write_text_file`, a session's child gets two
 * client-hosted tools that go through it, so the child reads what the editor shows (unsaved
 * buffers included) and its writes land in the editor. Paths are relative to the session's cwd
 * and may not leave it. The child's own file tools stay; these are offered beside them.
 * A restored child (after a daemon restart) loses client-hosted tools, these included.
 */
import { isAbsolute, relative, resolve } from 'node:path';
import * as acp from '@agentclientprotocol/sdk';
import type { ClientTool } from '../../client/index.js';

export interface EditorFs {
  readonly readTextFile?: boolean;
  readonly writeTextFile?: boolean;
}

const failure = (text: string) => ({ content: [{ type: 'text' as const, text }], isError: true });

function within(cwd: string, path: unknown): string | undefined {
  if (typeof path !== 'string' || path === '') return undefined;
  const absolute = resolve(cwd, path);
  const rel = relative(cwd, absolute);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel)) ? absolute : undefined;
}

export function editorFsTools(fs: EditorFs | undefined, editor: () => acp.AgentContext | undefined, sessionId: string, cwd: string): ClientTool[] {
  const tools: ClientTool[] = [];
  const call = async <T>(run: (target: acp.AgentContext) => Promise<T>): Promise<T> => {
    const target = editor();
    if (!target) throw new Error('the editor is not connected');
    return run(target);
  };
  if (fs?.readTextFile) {
    tools.push({
      name: 'editor_read_file',
      description: "Read a text file as the user's editor has it (unsaved changes included). The path is relative to the working directory.",
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false },
      async execute(args) {
        const path = within(cwd, (args as { path?: unknown }).path);
        if (!path) return failure('path must be a file inside the working directory');
        try {
          const { content } = await call((t) => t.request(acp.methods.client.fs.readTextFile, { sessionId, path }));
          return { content: [{ type: 'text', text: content }] };
        } catch (error) {
          return failure(`the editor could not read ${path}: ${(error as Error).message}`);
        }
      },
    });
  }
  if (fs?.writeTextFile) {
    tools.push({
      name: 'editor_write_file',
      description: "Write a text file through the user's editor. The path is relative to the working directory.",
      inputSchema: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } }, required: ['path', 'content'], additionalProperties: false },
      async execute(args) {
        const { content } = args as { content?: unknown };
        const path = within(cwd, (args as { path?: unknown }).path);
        if (!path || typeof content !== 'string') return failure('needs path (inside the working directory) and content (a string)');
        try {
          await call((t) => t.request(acp.methods.client.fs.writeTextFile, { sessionId, path, content }));
          return { content: [{ type: 'text', text: `wrote ${path}` }] };
        } catch (error) {
          return failure(`the editor could not write ${path}: ${(error as Error).message}`);
        }
      },
    });
  }
  return tools;
}
