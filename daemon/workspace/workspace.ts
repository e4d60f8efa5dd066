/**
 * Workspace containment: the one implementation, used by the agent's file tools and the ACP
 * `fs/*` handlers alike. A path is read against the workspace's cwd (`..` removed lexically,
 * absolute paths allowed), and access is granted on what is actually opened, never on a name:
 *
 * - the parent directory is resolved for real, checked to lie inside, then opened; the file is
 *   opened relative to that directory descriptor (through /proc/self/fd/N, Linux's openat), so
 *   no component can be swapped for a symlink between the check and the open;
 * - the final component is opened with O_NOFOLLOW (a symlink there is followed only after its
 *   real target is checked to be inside), O_NONBLOCK (a FIFO never blocks the libuv pool) and
 *   O_NOCTTY, and never with O_TRUNC: the caller empties a file only after the checks below;
 * - the descriptor is fstat'ed (regular files only: FIFOs, sockets and devices are refused) and
 *   its path re-read from /proc/self/fd/N must lie inside the real root;
 * - hard links: a file has no path back to its other names. A write refuses a file with more
 *   than one link (it would change the file under every other name, possibly outside). A read
 *   is allowed only when every one of its links is found inside the workspace by a bounded scan;
 *   otherwise it is refused, because the file may be outside data under an inside name.
 *
 * Without /proc (not Linux) the descriptor checks fall back to real paths and are racy: a
 * same-uid process swapping a directory between the check and the open is then not stopped.
 *
 * Failures are WorkspaceErrors whose message names the path as it was asked.
 */
import { constants, type Dirent } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { errnoOf, fsError, WorkspaceError } from './workspace-error.js';

/** How a file is opened: to read, to change an existing one, or to create it when missing. */
export type OpenMode = 'read' | 'update' | 'create';

export interface OpenOptions {
  /**
   * Reads of a multiply-linked file normally scan the workspace for its other links; walks that
   * open many files pass false to refuse such files at once instead.
   */
  readonly scanHardLinks?: boolean;
}

/** Entries a hard-link scan looks at before it gives up and refuses the file. */
export const MAX_HARD_LINK_SCAN_ENTRIES = 20_000;

const O_DIRECTORY = constants.O_DIRECTORY ?? 0;
const O_NOCTTY = constants.O_NOCTTY ?? 0;
const OPEN_FLAGS: Record<OpenMode, number> = {
  read: constants.O_RDONLY,
  update: constants.O_RDWR,
  create: constants.O_RDWR | constants.O_CREAT,
};
const SAFE_FLAGS = constants.O_NOFOLLOW | constants.O_NONBLOCK | O_NOCTTY;
// O_NONBLOCK too: a FIFO swapped in for a directory must not block before ENOTDIR.
const DIRECTORY_FLAGS = constants.O_RDONLY | O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const PROC_FD = '/proc/self/fd';

export class Workspace {
  private constructor(
    /** The cwd as the parent knows it; relative paths are read against it. */
    readonly cwd: string,
    /** The cwd with symlinks resolved: the authority for containment. */
    readonly real: string,
  ) {}

  static async open(cwd: string): Promise<Workspace> {
    const real = await realpath(cwd);
    if (!(await stat(real)).isDirectory()) throw new WorkspaceError('not-a-directory', `${cwd} is not a directory`);
    return new Workspace(resolve(cwd), real);
  }

  /** Whether a real (symlink-free) path lies inside the root. */
  contains(realPath: string): boolean {
    return isInside(this.real, realPath);
  }

  /** The path relative to the real root, for messages the model reads. */
  display(realPath: string): string {
    return relative(this.real, realPath) || '.';
  }

  /** Opens a regular file inside the workspace; the caller closes it. */
  async openFile(path: string, mode: OpenMode, options: OpenOptions = {}): Promise<WorkspaceFile> {
    const lexical = this.lexical(path);
    if (lexical === this.cwd || lexical === this.real) throw new WorkspaceError('not-a-file', `${path} is a directory`);
    const parent = mode === 'create' ? await this.makeParents(dirname(lexical), path) : await this.realInside(dirname(lexical), path);
    let dir = parent;
    let name = basename(lexical);
    const entry = await lstat(join(dir, name)).catch((error: unknown) => {
      if (errnoOf(error) === 'ENOENT') return undefined;
      throw fsError(path, error);
    });
    if (entry?.isSymbolicLink()) {
      const target = await realpath(join(dir, name)).catch((error: unknown) => {
        // Where a dangling link would create its target is not worth reasoning about: refuse.
        if (errnoOf(error) === 'ENOENT') throw new WorkspaceError('invalid-path', `${path} is a dangling symlink`);
        throw fsError(path, error);
      });
      this.assertInside(target, path);
      dir = dirname(target);
      name = basename(target);
    } else if (entry && !entry.isFile()) {
      // Refused before opening: opening a device can have side effects of its own.
      throw new WorkspaceError('not-a-file', `${path} is not a regular file`);
    }
    const handle = await this.openAt(dir, name, OPEN_FLAGS[mode] | SAFE_FLAGS, path);
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new WorkspaceError('not-a-file', `${path} is not a regular file`);
      const real = await this.verifyDescriptor(handle, join(dir, name), path);
      if (info.nlink > 1) {
        if (mode !== 'read') {
          throw new WorkspaceError('hard-linked', `${path} has ${info.nlink} hard links; writing it would change every other name too`);
        }
        await this.assertLinksInside(info.dev, info.ino, info.nlink, path, options.scanHardLinks ?? true);
      }
      return new WorkspaceFile(handle, real, info.size);
    } catch (error) {
      await handle.close();
      throw fsError(path, error);
    }
  }

  /** Lists a directory inside the workspace (entries of the directory actually opened). */
  async listDirectory(path: string): Promise<{ real: string; entries: Dirent[] }> {
    const real = await this.realInside(this.lexical(path), path);
    const handle = await open(real, DIRECTORY_FLAGS).catch((error: unknown) => {
      throw errnoOf(error) === 'ENOTDIR' ? new WorkspaceError('not-a-directory', `${path} is not a directory`) : fsError(path, error);
    });
    try {
      await this.verifyDescriptor(handle, real, path);
      const viaFd = (await hasProcFd()) ? `${PROC_FD}/${handle.fd}` : real;
      const entries = await readdir(viaFd, { withFileTypes: true }).catch((error: unknown) => {
        throw fsError(path, error);
      });
      return { real, entries };
    } finally {
      await handle.close();
    }
  }

  private lexical(path: string): string {
    if (typeof path !== 'string' || path === '' || path.includes('\0')) {
      throw new WorkspaceError('invalid-path', `invalid path ${JSON.stringify(path)}`);
    }
    return resolve(this.cwd, path);
  }

  private assertInside(realPath: string, shown: string): void {
    if (!this.contains(realPath)) {
      throw new WorkspaceError('outside-root', `${shown} is outside the workspace (${this.cwd}); access refused`);
    }
  }

  /** The real path of an existing `lexical`, which must lie inside. */
  private async realInside(lexical: string, shown: string): Promise<string> {
    const real = await realpath(lexical).catch((error: unknown) => {
      throw fsError(shown, error);
    });
    this.assertInside(real, shown);
    return real;
  }

  /**
   * The real path of directory `lexical`, creating what is missing one level at a time, each
   * level checked before the next is made inside it.
   */
  private async makeParents(lexical: string, shown: string): Promise<string> {
    const missing: string[] = [];
    let ancestor = lexical;
    let real: string;
    for (;;) {
      try {
        real = await realpath(ancestor);
        break;
      } catch (error) {
        if (errnoOf(error) !== 'ENOENT' || dirname(ancestor) === ancestor) throw fsError(shown, error);
        missing.unshift(basename(ancestor));
        ancestor = dirname(ancestor);
      }
    }
    this.assertInside(real, shown);
    for (const name of missing) {
      const next = join(real, name);
      await mkdir(next).catch((error: unknown) => {
        if (errnoOf(error) !== 'EEXIST') throw fsError(shown, error);
      });
      real = await this.realInside(next, shown);
    }
    return real;
  }

  /** Opens `name` inside directory `dir` through a checked descriptor of `dir` itself. */
  private async openAt(dir: string, name: string, flags: number, shown: string): Promise<FileHandle> {
    if (!(await hasProcFd())) {
      return open(join(dir, name), flags, 0o644).catch((error: unknown) => {
        throw fsError(shown, error);
      });
    }
    const dirHandle = await open(dir, DIRECTORY_FLAGS).catch((error: unknown) => {
      throw fsError(shown, error);
    });
    try {
      await this.verifyDescriptor(dirHandle, dir, shown);
      return await open(`${PROC_FD}/${dirHandle.fd}/${name}`, flags, 0o644).catch((error: unknown) => {
        throw fsError(shown, error);
      });
    } finally {
      await dirHandle.close();
    }
  }

  /** Where the descriptor really points (from /proc when present), checked to lie inside. */
  private async verifyDescriptor(handle: FileHandle, expected: string, shown: string): Promise<string> {
    const real = (await hasProcFd()) ? await readlink(`${PROC_FD}/${handle.fd}`) : expected;
    this.assertInside(real, shown);
    return real;
  }

  /** Every link of inode (dev, ino) must be found inside the workspace within a bounded scan. */
  private async assertLinksInside(dev: number, ino: number, nlink: number, shown: string, scan: boolean): Promise<void> {
    const refuse = (): never => {
      throw new WorkspaceError(
        'hard-linked',
        `${shown} has ${nlink} hard links and not all of them were found inside the workspace; a hard link may lead outside, so it is not read`,
      );
    };
    if (!scan) refuse();
    let found = 0;
    let seen = 0;
    const pending = [this.real];
    while (pending.length > 0 && seen < MAX_HARD_LINK_SCAN_ENTRIES) {
      const current = pending.pop() as string;
      const entries = await readdir(current, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        seen += 1;
        const path = join(current, entry.name);
        if (entry.isDirectory()) pending.push(path);
        else if (entry.isFile()) {
          const info = await lstat(path).catch(() => undefined);
          if (info?.dev === dev && info.ino === ino && ++found === nlink) return;
        }
      }
    }
    refuse();
  }
}

/** An open, checked regular file of the workspace. */
export class WorkspaceFile {
  constructor(
    private readonly handle: FileHandle,
    /** Its real path (as opened), inside the workspace. */
    readonly real: string,
    /** Its size when opened. */
    readonly size: number,
  ) {}

  /** At most `max` bytes from the start, and whether there was more. Sized by the file, not by `max`. */
  async readHead(max: number): Promise<{ bytes: Buffer; truncated: boolean }> {
    let buffer = Buffer.allocUnsafe(Math.min(max, this.size) + 1);
    let filled = 0;
    for (;;) {
      if (filled === buffer.length) {
        if (buffer.length > max) break;
        // The file grew since fstat: grow up to one byte past `max`, enough to tell it was cut.
        const grown = Buffer.allocUnsafe(Math.min(max + 1, buffer.length * 2));
        buffer.copy(grown, 0, 0, filled);
        buffer = grown;
      }
      const { bytesRead } = await this.handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { bytes: buffer.subarray(0, Math.min(filled, max)), truncated: filled > max };
  }

  /** The whole content as text; refuses a file over `max` bytes. */
  async readText(max: number, shown: string): Promise<string> {
    const { bytes, truncated } = await this.readHead(max);
    if (truncated) throw new WorkspaceError('too-large', `${shown} is larger than ${max} bytes`);
    return bytes.toString('utf8');
  }

  /** Empties the file, then writes `text`: called only on a checked, writable descriptor. */
  async replace(text: string): Promise<void> {
    await this.handle.truncate(0);
    const bytes = Buffer.from(text, 'utf8');
    let written = 0;
    while (written < bytes.length) {
      const { bytesWritten } = await this.handle.write(bytes, written, bytes.length - written, written);
      written += bytesWritten;
    }
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

/**
 * The containment test on real paths: `path` is `root` or below it. A sibling that merely starts
 * with the same characters (`/ws-other` for `/ws`) is outside.
 */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/** Opens, runs `use`, and always closes. */
export async function withFile<T>(
  workspace: Workspace,
  path: string,
  mode: OpenMode,
  use: (file: WorkspaceFile) => Promise<T>,
  options?: OpenOptions,
): Promise<T> {
  const file = await workspace.openFile(path, mode, options);
  try {
    return await use(file);
  } finally {
    await file.close();
  }
}

let procFd: Promise<boolean> | undefined;
/** Whether /proc/self/fd resolves descriptors (Linux); checked once. */
function hasProcFd(): Promise<boolean> {
  procFd ??= stat(PROC_FD).then(
    (info) => info.isDirectory(),
    () => false,
  );
  return procFd;
}
