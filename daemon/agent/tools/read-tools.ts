/** The always-available workspace tools: they read, never change anything. */
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { textOutcome, type AgentTool } from './tool.js';
import type { WorkspaceRoot } from './workspace-root.js';

const MAX_READ_BYTES = 256 * 1024;
const MAX_LIST_ENTRIES = 1000;
const MAX_SEARCH_FILE_BYTES = 1024 * 1024;
const MAX_SEARCH_FILES = 20_000;
const MAX_MATCH_LINE_CHARS = 300;
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

export function readFileTool(root: WorkspaceRoot): AgentTool {
  return {
    name: 'read_file',
    description: `Read a text file in the workspace. Optional 1-based startLine/endLine select a range. At most ${MAX_READ_BYTES / 1024} KiB are returned.`,
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', minLength: 1, description: 'File path, relative to the workspace root.' },
        startLine: { type: 'integer', minimum: 1 },
        endLine: { type: 'integer', minimum: 1 },
      },
      required: ['path'],
      additionalProperties: false,
    },
    async execute(args) {
      const { path, startLine, endLine } = args as { path: string; startLine?: number; endLine?: number };
      const target = await root.existing(path);
      if (!(await stat(target)).isFile()) return textOutcome(`${path} is not a file`, true);
      const { bytes, truncated } = await readHead(target, MAX_READ_BYTES);
      if (bytes.includes(0)) return textOutcome(`${path} looks like a binary file; not shown`, true);
      let text = bytes.toString('utf8');
      if (startLine !== undefined || endLine !== undefined) {
        text = text.split('\n').slice((startLine ?? 1) - 1, endLine).join('\n');
      }
      const note = truncated ? `\n[truncated: the file is larger than ${MAX_READ_BYTES} bytes; read a line range]` : '';
      return textOutcome(text + note);
    },
  };
}

export function listDirectoryTool(root: WorkspaceRoot): AgentTool {
  return {
    name: 'list_directory',
    description: 'List a directory in the workspace: folders end with "/", symlinks with "@".',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', description: 'Directory, relative to the workspace root (default ".").' } },
      additionalProperties: false,
    },
    async execute(args) {
      const { path = '.' } = args as { path?: string };
      const target = await root.existing(path);
      const entries = (await readdir(target, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
      const lines = entries
        .slice(0, MAX_LIST_ENTRIES)
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name));
      if (entries.length > MAX_LIST_ENTRIES) lines.push(`[${entries.length - MAX_LIST_ENTRIES} more entries not shown]`);
      return textOutcome(lines.length > 0 ? lines.join('\n') : '(empty directory)');
    },
  };
}

export function searchTextTool(root: WorkspaceRoot): AgentTool {
  return {
    name: 'search_text',
    description:
      'Search the text files under a workspace folder for a literal string (or a regular expression with regex: true). Returns "path:line: text" lines. Skips .git, node_modules, symlinks and binary files.',
    parameters: {
      type: 'object',
      properties: {
        query: { type: 'string', minLength: 1 },
        path: { type: 'string', description: 'Folder or file to search (default ".").' },
        regex: { type: 'boolean' },
        ignoreCase: { type: 'boolean' },
        maxResults: { type: 'integer', minimum: 1, maximum: 1000 },
      },
      required: ['query'],
      additionalProperties: false,
    },
    async execute(args, ctx) {
      const { query, path = '.', regex = false, ignoreCase = false, maxResults = 100 } = args as {
        query: string;
        path?: string;
        regex?: boolean;
        ignoreCase?: boolean;
        maxResults?: number;
      };
      let pattern: RegExp;
      try {
        pattern = new RegExp(regex ? query : escapeRegExp(query), ignoreCase ? 'i' : '');
      } catch (error) {
        return textOutcome(`Invalid regular expression: ${(error as Error).message}`, true);
      }
      const start = await root.existing(path);
      const matches: string[] = [];
      let scanned = 0;
      // Depth-first walk that never follows symlinks, so it cannot wander outside the root.
      const pending: string[] = [start];
      while (pending.length > 0 && matches.length < maxResults && scanned < MAX_SEARCH_FILES) {
        if (ctx.signal.aborted) return textOutcome('search cancelled', true);
        const current = pending.pop() as string;
        const info = await stat(current);
        if (info.isDirectory()) {
          const entries = await readdir(current, { withFileTypes: true });
          for (const entry of entries.sort((a, b) => b.name.localeCompare(a.name))) {
            if (entry.isSymbolicLink() || (entry.isDirectory() && SKIPPED_DIRS.has(entry.name))) continue;
            if (entry.isDirectory() || entry.isFile()) pending.push(join(current, entry.name));
          }
          continue;
        }
        scanned += 1;
        if (info.size > MAX_SEARCH_FILE_BYTES) continue;
        const bytes = await readFile(current);
        if (bytes.includes(0)) continue;
        const lines = bytes.toString('utf8').split('\n');
        for (let i = 0; i < lines.length && matches.length < maxResults; i += 1) {
          const line = lines[i] ?? '';
          if (pattern.test(line)) matches.push(`${root.display(current)}:${i + 1}: ${line.slice(0, MAX_MATCH_LINE_CHARS)}`);
        }
      }
      if (matches.length === 0) return textOutcome('no matches');
      const capped = matches.length >= maxResults ? `\n[stopped at ${maxResults} matches]` : '';
      return textOutcome(matches.join('\n') + capped);
    },
  };
}

async function readHead(file: string, max: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.alloc(max + 1);
    const { bytesRead } = await handle.read(buffer, 0, max + 1, 0);
    return { bytes: buffer.subarray(0, Math.min(bytesRead, max)), truncated: bytesRead > max };
  } finally {
    await handle.close();
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
