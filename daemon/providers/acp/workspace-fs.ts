/**
 * The `fs/*` client methods' own rules on top of the shared workspace containment
 * (daemon/workspace): ACP paths must be absolute, `line`/`limit` select lines, and a read is
 * bounded in bytes. Which files may be touched is decided by the workspace alone.
 */
import { isAbsolute } from 'node:path';
import { WorkspaceError } from '../../workspace/workspace-error.js';
import { withFile, Workspace } from '../../workspace/workspace.js';

/** Larger files would not fit one ACP message comfortably (JSON escaping can double the size). */
export const MAX_READ_BYTES = 8 * 1024 * 1024;

export class WorkspaceFs {
  private constructor(private readonly workspace: Workspace) {}

  /** `root` must be an existing directory: the parent's cwd. */
  static async open(root: string): Promise<WorkspaceFs> {
    return new WorkspaceFs(await Workspace.open(root));
  }

  async readText(path: string, line?: number | null, limit?: number | null): Promise<string> {
    const text = await withFile(this.workspace, absolute(path), 'read', (file) => file.readText(MAX_READ_BYTES, path));
    return sliceLines(text, line, limit);
  }

  async writeText(path: string, content: string): Promise<void> {
    await withFile(this.workspace, absolute(path), 'create', (file) => file.replace(content));
  }
}

function absolute(path: string): string {
  if (typeof path !== 'string' || !isAbsolute(path)) {
    throw new WorkspaceError('invalid-path', `path must be absolute: ${JSON.stringify(path)}`);
  }
  return path;
}

/** ACP's `line` is 1-based; `limit` counts lines. */
function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
  const lines = text.split('\n');
  const start = Math.max(0, (line ?? 1) - 1);
  const end = limit === undefined || limit === null ? lines.length : start + Math.max(0, limit);
  return lines.slice(start, end).join('\n');
}
