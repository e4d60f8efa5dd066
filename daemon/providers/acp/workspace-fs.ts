/**
 * The `fs/*` client methods, rooted at the parent's working directory. Containment is decided
 * on real paths (symlinks resolved), and every opened descriptor is re-checked through
 * /proc/self/fd, so a symlink swapped in between the check and the open cannot escape the root.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';

export type WorkspaceFsErrorKind = 'invalid-path' | 'outside-root' | 'not-found' | 'not-a-file' | 'too-large' | 'io';

export class WorkspaceFsError extends Error {
  override readonly name = 'WorkspaceFsError';
  constructor(
    readonly kind: WorkspaceFsErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** Larger files would not fit one ACP message comfortably (JSON escaping can double the size). */
export const MAX_READ_BYTES = 8 * 1024 * 1024;

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
// No O_TRUNC: truncation waits until the descriptor is verified to lie inside the root.
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

function ioError(path: string, error: unknown): WorkspaceFsError {
  const code = errorCode(error);
  if (code === 'ENOENT') return new WorkspaceFsError('not-found', `no such file: ${path}`);
  if (code === 'ELOOP') return new WorkspaceFsError('outside-root', `refusing to follow a symlink at ${path}`);
  if (code === 'EISDIR') return new WorkspaceFsError('not-a-file', `${path} is a directory`);
  return new WorkspaceFsError('io', `${path}: ${code ?? (error instanceof Error ? error.message : String(error))}`);
}

export class WorkspaceFs {
  private constructor(readonly root: string) {}

  /** `root` must exist; containment is checked against its real path. */
  static async open(root: string): Promise<WorkspaceFs> {
    return new WorkspaceFs(await realpath(root));
  }

  contains(realPath: string): boolean {
    return this.root === sep || realPath === this.root || realPath.startsWith(this.root + sep);
  }

  async readText(path: string, line?: number | null, limit?: number | null): Promise<string> {
    const target = this.absolute(path);
    const real = await realpath(target).catch((error: unknown) => {
      throw ioError(path, error);
    });
    this.assertInside(real, path);
    const info = await stat(real).catch((error: unknown) => {
      throw ioError(path, error);
    });
    // Checked before open: opening a FIFO or device could block or have side effects.
    if (!info.isFile()) throw new WorkspaceFsError('not-a-file', `${path} is not a regular file`);
    const handle = await open(real, READ_FLAGS).catch((error: unknown) => {
      throw ioError(path, error);
    });
    try {
      await this.verifyDescriptor(handle, path);
      const opened = await handle.stat();
      if (!opened.isFile()) throw new WorkspaceFsError('not-a-file', `${path} is not a regular file`);
      if (opened.size > MAX_READ_BYTES) {
        throw new WorkspaceFsError('too-large', `${path} is ${opened.size} bytes; the limit is ${MAX_READ_BYTES}`);
      }
      return sliceLines(await handle.readFile('utf8'), line, limit);
    } finally {
      await handle.close();
    }
  }

  async writeText(path: string, content: string): Promise<void> {
    const target = this.absolute(path);
    let file = await this.resolveForWrite(target, path);
    const existing = await lstat(file).catch((error: unknown) => {
      if (errorCode(error) === 'ENOENT') return undefined;
      throw ioError(path, error);
    });
    if (existing?.isSymbolicLink()) {
      // A link at the final component is followed only when its target stays inside the root.
      file = await realpath(file).catch((error: unknown) => {
        // Where a dangling link would create its target is not worth reasoning about: refuse.
        if (errorCode(error) === 'ENOENT') throw new WorkspaceFsError('invalid-path', `${path} is a dangling symlink`);
        throw ioError(path, error);
      });
      this.assertInside(file, path);
    } else if (existing && !existing.isFile()) {
      throw new WorkspaceFsError('not-a-file', `${path} is not a regular file`);
    }
    const handle = await open(file, WRITE_FLAGS, 0o666).catch((error: unknown) => {
      throw ioError(path, error);
    });
    try {
      await this.verifyDescriptor(handle, path);
      if (!(await handle.stat()).isFile()) throw new WorkspaceFsError('not-a-file', `${path} is not a regular file`);
      await handle.truncate(0);
      await handle.writeFile(content, 'utf8');
    } finally {
      await handle.close();
    }
  }

  private absolute(path: string): string {
    if (typeof path !== 'string' || !isAbsolute(path)) {
      throw new WorkspaceFsError('invalid-path', `path must be absolute: ${JSON.stringify(path)}`);
    }
    return resolve(path);
  }

  private assertInside(realPath: string, shown: string): void {
    if (!this.contains(realPath)) {
      throw new WorkspaceFsError('outside-root', `${shown} is outside the session root ${this.root}`);
    }
  }

  /** The real path to write: the nearest existing ancestor resolved, missing directories created. */
  private async resolveForWrite(target: string, shown: string): Promise<string> {
    const missing: string[] = [];
    let ancestor = dirname(target);
    let realAncestor: string;
    for (;;) {
      try {
        realAncestor = await realpath(ancestor);
        break;
      } catch (error) {
        if (errorCode(error) !== 'ENOENT' || dirname(ancestor) === ancestor) throw ioError(shown, error);
        missing.unshift(basename(ancestor));
        ancestor = dirname(ancestor);
      }
    }
    this.assertInside(realAncestor, shown);
    const parent = join(realAncestor, ...missing);
    if (missing.length > 0) {
      await mkdir(parent, { recursive: true }).catch((error: unknown) => {
        throw ioError(shown, error);
      });
      // The created chain must still resolve inside the root (no symlink raced into it).
      this.assertInside(await realpath(parent), shown);
    }
    return join(parent, basename(target));
  }

  private async verifyDescriptor(handle: FileHandle, shown: string): Promise<void> {
    let opened: string;
    try {
      opened = await readlink(`/proc/self/fd/${handle.fd}`);
    } catch {
      return; // No procfs: the real-path checks above are the whole defence.
    }
    this.assertInside(opened, shown);
  }
}

/** ACP's `line` is 1-based; `limit` counts lines. */
function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
  const lines = text.split('\n');
  const start = Math.max(0, (line ?? 1) - 1);
  const end = limit === undefined || limit === null ? lines.length : start + Math.max(0, limit);
  return lines.slice(start, end).join('\n');
}
