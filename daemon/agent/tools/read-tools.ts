/**
 * The always-available workspace tools: they read, never change anything. Every file and
 * directory is reached through the workspace (daemon/workspace), which opens regular files only
 * and refuses anything outside; the search walk skips what it refuses.
 */
import { join } from 'node:path';
import { WorkspaceError } from '../../workspace/workspace-error.js';
import { withFile, type Workspace } from '../../workspace/workspace.js';
import { compileQuery, MAX_MATCHED_LINE_CHARS, MAX_QUERY_CHARS, Slicer } from './text-search.js';
import { textOutcome, type AgentTool } from './tool.js';

const MAX_READ_BYTES = 256 * 1024;
const MAX_LIST_ENTRIES = 1000;
const MAX_SEARCH_FILE_BYTES = 1024 * 1024;
const MAX_SEARCH_FILES = 20_000;
const MAX_MATCH_LINE_CHARS = 300;
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

export function readFileTool(root: Workspace): AgentTool {
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
      const { bytes, truncated } = await withFile(root, path, 'read', (file) => file.readHead(MAX_READ_BYTES));
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

export function listDirectoryTool(root: Workspace): AgentTool {
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
      const { entries: listed } = await root.listDirectory(path);
      const entries = listed.sort((a, b) => a.name.localeCompare(b.name));
      const lines = entries
        .slice(0, MAX_LIST_ENTRIES)
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name));
      if (entries.length > MAX_LIST_ENTRIES) lines.push(`[${entries.length - MAX_LIST_ENTRIES} more entries not shown]`);
      return textOutcome(lines.length > 0 ? lines.join('\n') : '(empty directory)');
    },
  };
}

export function searchTextTool(root: Workspace): AgentTool {
  return {
    name: 'search_text',
    description: `Search the text files under a workspace folder for a literal string (or an RE2 regular expression with regex: true; no lookaround or backreferences). Returns "path:line: text" lines. Skips .git, node_modules, symlinks, non-regular and binary files; lines longer than ${MAX_MATCHED_LINE_CHARS} characters are searched in their first ${MAX_MATCHED_LINE_CHARS}.`,
    parameters: {
      type: 'object',
      properties: {
        query: { type: 'string', minLength: 1, maxLength: MAX_QUERY_CHARS },
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
      const pattern = compileQuery(query, regex, ignoreCase);
      if (typeof pattern === 'string') return textOutcome(pattern, true);
      const slicer = new Slicer(ctx.signal);
      const cancelled = (): ReturnType<typeof textOutcome> => textOutcome('search cancelled', true);
      const matches: string[] = [];
      let scanned = 0;
      // Depth-first walk of directory entries as listed (symlinks are never followed).
      const pending: Array<{ path: string; dir: boolean }> = [await searchStart(root, path)];
      while (pending.length > 0 && matches.length < maxResults && scanned < MAX_SEARCH_FILES) {
        if (ctx.signal.aborted || (slicer.due() && (await slicer.yieldTurn()))) return cancelled();
        const current = pending.pop() as { path: string; dir: boolean };
        if (current.dir) {
          const { real, entries } = await root.listDirectory(current.path).catch(skipRefused);
          for (const entry of entries.sort((a, b) => b.name.localeCompare(a.name))) {
            if (entry.isDirectory() && !SKIPPED_DIRS.has(entry.name)) pending.push({ path: join(real, entry.name), dir: true });
            else if (entry.isFile()) pending.push({ path: join(real, entry.name), dir: false });
          }
          continue;
        }
        scanned += 1;
        const text = await readSearchable(root, current.path);
        if (text === undefined) continue;
        // Line by line without splitting the whole file at once (one large allocation less per file).
        for (let start = 0, lineNo = 1; start <= text.length && matches.length < maxResults; lineNo += 1) {
          if (slicer.due() && (await slicer.yieldTurn())) return cancelled();
          const newline = text.indexOf('\n', start);
          const end = newline === -1 ? text.length : newline;
          const line = text.slice(start, end);
          if (pattern.test(line)) matches.push(`${root.display(current.path)}:${lineNo}: ${line.slice(0, MAX_MATCH_LINE_CHARS)}`);
          start = end + 1;
        }
      }
      if (matches.length === 0) return textOutcome('no matches');
      const capped = matches.length >= maxResults ? `\n[stopped at ${maxResults} matches]` : '';
      return textOutcome(matches.join('\n') + capped);
    },
  };
}

/** Where a search begins: a folder, or one file (refused with an error, not skipped). */
async function searchStart(root: Workspace, path: string): Promise<{ path: string; dir: boolean }> {
  try {
    return { path: (await root.listDirectory(path)).real, dir: true };
  } catch (error) {
    if (!(error instanceof WorkspaceError) || error.kind !== 'not-a-directory') throw error;
    return { path: await withFile(root, path, 'read', async (file) => file.real), dir: false };
  }
}

/** A directory the walk may not enter (gone, swapped, refused) is skipped like an empty one. */
function skipRefused(error: unknown): { real: string; entries: [] } {
  if (error instanceof WorkspaceError) return { real: '', entries: [] };
  throw error;
}

/** The text of a file worth searching, or undefined for one that is refused, too big or binary. */
async function readSearchable(root: Workspace, path: string): Promise<string | undefined> {
  try {
    return await withFile(
      root,
      path,
      'read',
      async (file) => {
        if (file.size > MAX_SEARCH_FILE_BYTES) return undefined;
        const { bytes, truncated } = await file.readHead(MAX_SEARCH_FILE_BYTES);
        return truncated || bytes.includes(0) ? undefined : bytes.toString('utf8');
      },
      { scanHardLinks: false },
    );
  } catch (error) {
    if (error instanceof WorkspaceError) return undefined;
    throw error;
  }
}
