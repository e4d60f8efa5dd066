/**
 * The commit a work tree's `HEAD` names, read from git's own files (the `HEAD` file, a loose ref,
 * `packed-refs`) on every start through a cluster member: the front sends it with the start's
 * workspace identity (workspace.ts).
 *
 * Each file is read again only when its stat changed (inode, size, mtime): git rewrites a ref or
 * `HEAD` by renaming a new file over it, so a moved branch is a new inode. A missing file is
 * looked at without an exception (an unpacked repository has no `packed-refs`, a packed one no
 * loose ref): on a busy member the thrown-and-caught errors of plain reads were a few % of its CPU.
 * Within one turn of the event loop the answer is kept: the starts a turn handles were all read
 * from their sockets before any of them looked, so a look per start could not tell them apart.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface Seen {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly text: string;
}

/** Where a work tree's refs live: its own git dir (HEAD) and the repository's common dir (refs). */
export interface GitDirs {
  readonly gitDir: string;
  readonly commonDir: string;
}

const MAX_FILES = 1024;
const seen = new Map<string, Seen>();

/** The file's text, from the cache while its stat is unchanged; undefined when it does not exist. */
function readIfChanged(path: string): string | undefined {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat?.isFile()) {
    seen.delete(path);
    return undefined;
  }
  const known = seen.get(path);
  if (known && known.ino === stat.ino && known.size === stat.size && known.mtimeMs === stat.mtimeMs) return known.text;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined; // gone between the stat and the read
  }
  if (seen.size >= MAX_FILES) seen.delete(seen.keys().next().value!);
  seen.set(path, { ino: stat.ino, size: stat.size, mtimeMs: stat.mtimeMs, text });
  return text;
}

/**
 * `HEAD`'s commit, or undefined for an unborn branch; `null` when the files do not say (a
 * format this does not read, such as a reftable repository): the caller asks git.
 */
export function headFromFiles(dirs: GitDirs): string | undefined | null {
  const key = `${dirs.gitDir}\0${dirs.commonDir}`;
  if (thisTurn.has(key)) return thisTurn.get(key)!;
  const head = readHead(dirs);
  if (thisTurn.size === 0) setImmediate(() => thisTurn.clear());
  thisTurn.set(key, head);
  return head;
}

/** Heads already read in this turn of the event loop, by git dirs. */
const thisTurn = new Map<string, string | undefined | null>();

function readHead(dirs: GitDirs): string | undefined | null {
  let content = readIfChanged(join(dirs.gitDir, 'HEAD'))?.trim();
  for (let hops = 0; content?.startsWith('ref: ') && hops < 5; hops++) {
    const ref = content.slice(5).trim();
    const loose = readIfChanged(join(dirs.commonDir, ref)) ?? readIfChanged(join(dirs.gitDir, ref));
    if (loose !== undefined) {
      content = loose.trim();
      continue;
    }
    const packed = readIfChanged(join(dirs.commonDir, 'packed-refs')) ?? '';
    const line = packed.split('\n').find((l) => l.endsWith(` ${ref}`));
    if (!line) return undefined; // an unborn branch: no commit yet
    content = line.slice(0, line.indexOf(' '));
  }
  return content !== undefined && /^[0-9a-f]{40,64}$/.test(content) ? content : null;
}
