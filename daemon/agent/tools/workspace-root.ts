/**
 * The folder the built-in tools are confined to (the parent's cwd). A path is resolved against
 * it, then checked after resolving symlinks (`realpath` of the target, or of its nearest existing
 * ancestor for a file still to be created), so neither `..` nor a symlink can reach outside.
 */
import { realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';

export class PathEscapeError extends Error {
  override readonly name = 'PathEscapeError';
}

export class WorkspaceRoot {
  private constructor(
    /** The cwd as the parent knows it; relative and absolute paths are read against it. */
    readonly cwd: string,
    /** The cwd with symlinks resolved: the authority for containment. */
    readonly real: string,
  ) {}

  static async open(cwd: string): Promise<WorkspaceRoot> {
    const real = await realpath(cwd);
    if (!(await stat(real)).isDirectory()) throw new Error(`${cwd} is not a directory`);
    return new WorkspaceRoot(resolve(cwd), real);
  }

  /** Resolves a path that must exist; returns its real location inside the root. */
  async existing(path: string): Promise<string> {
    const target = await realpath(resolve(this.cwd, path)).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT' ? new Error(`${path} does not exist`) : error;
    });
    this.assertInside(path, target);
    return target;
  }

  /**
   * Resolves a path that may not exist yet (for writing). The nearest existing ancestor is
   * resolved for real; `resolve` has already removed every `..`, so the rest cannot climb out.
   */
  async writable(path: string): Promise<string> {
    const lexical = resolve(this.cwd, path);
    let ancestor = lexical;
    const missing: string[] = [];
    for (;;) {
      try {
        const real = await realpath(ancestor);
        const target = resolve(real, ...missing.reverse());
        this.assertInside(path, target);
        return target;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        const parent = dirname(ancestor);
        if (parent === ancestor) throw error;
        missing.push(ancestor.slice(parent.length).replace(/^[/\\]/, ''));
        ancestor = parent;
      }
    }
  }

  /** The path relative to the real root, for messages the model reads. */
  display(realTarget: string): string {
    return relative(this.real, realTarget) || '.';
  }

  private assertInside(asked: string, target: string): void {
    const rel = relative(this.real, target);
    if (rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))) return;
    throw new PathEscapeError(`${asked} is outside the workspace (${this.cwd}); access refused`);
  }
}
