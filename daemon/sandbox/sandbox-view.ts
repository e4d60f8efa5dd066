/**
 * What a sandboxed `run_shell` command sees, built as an allowlist: bwrap starts from an empty
 * root and mounts only what is listed here (docs/security.md, "The shell sandbox's view").
 *
 * - read-only: the system folders programs need (SYSTEM_READ_ONLY), plus the operator's
 *   `tools.shellReadOnly`;
 * - read-write: the workspace;
 * - read-only for a workspace that is a git worktree: the main repository's git dir (the common
 *   dir its `.git` file leads to), so git works inside, and nothing there can be rewritten;
 * - private and empty: `/tmp`, a minimal `/dev`, the sandbox's own `/proc` (a new pid namespace);
 * - hidden: everything else — the home folder, `/run` (so `$XDG_RUNTIME_DIR`), `/var`, `/sys`,
 *   and whatever the daemon keeps. The `hidden` paths (the daemon's state dir, socket folder,
 *   token files, config and env file, `$XDG_RUNTIME_DIR`, and the user's key folders) are also
 *   masked wherever a visible folder would otherwise show them, the workspace included: a mask
 *   always wins over a bind.
 *
 * Every path is taken by its real path, so a symlink leads nowhere the view does not show.
 */
import { lstatSync, readFileSync, readlinkSync, realpathSync, statSync } from '../../common/node-builtins.js';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';

export interface SandboxView {
  /** Extra read-only folders or files (`tools.shellReadOnly`), absolute. */
  readonly readOnly: readonly string[];
  /** Paths the command must never see, wherever they are (absolute; missing ones are skipped). */
  readonly hidden: readonly string[];
  /** Share the host's network (`tools.shellNetwork`); otherwise a private loopback only. */
  readonly network: boolean;
  /** Folders inside a hidden path whose subfolders may still be a workspace (the daemon's worktrees). */
  readonly workspaceAreas?: readonly string[];
}

/** Read-only system folders, each mounted if it exists (as a symlink when it is one, as in merged /usr). */
export const SYSTEM_READ_ONLY = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'] as const;

/** Under /etc: what only root should read, masked even though /etc is shown. */
export const SYSTEM_SECRETS = ['/etc/shadow', '/etc/gshadow', '/etc/sudoers', '/etc/sudoers.d', '/etc/ssl/private', '/etc/ssh'] as const;

/** Under the home folder: the user's keys and credentials, masked if a visible folder holds them. */
export const HOME_SECRETS = [
  '.ssh',
  '.gnupg',
  '.aws',
  '.azure',
  '.kube',
  '.docker',
  '.netrc',
  '.git-credentials',
  '.npmrc',
  '.pypirc',
  '.config/gh',
  '.config/gcloud',
  '.password-store',
] as const;

/** With the network on, DNS may need systemd-resolved's stub file that /etc/resolv.conf points to. */
const NETWORK_EXTRAS = ['/run/systemd/resolve'];

export class SandboxRefusal extends Error {
  override readonly name = 'SandboxRefusal';
}

/** bwrap's arguments for `view` with `workspace` (a real path) read-write, up to (not including) `--`. */
export function sandboxArgs(view: SandboxView, workspace: string | undefined): string[] {
  const args = [
    '--die-with-parent',
    '--new-session',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(view.network ? [] : ['--unshare-net']),
  ];
  for (const path of SYSTEM_READ_ONLY) args.push(...systemMount(path));
  args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp');
  if (view.network) for (const path of NETWORK_EXTRAS) args.push('--ro-bind-try', path, path);
  const visible: string[] = [...SYSTEM_READ_ONLY];
  for (const path of view.readOnly) {
    const real = realOrUndefined(path);
    if (real === undefined) continue;
    args.push('--ro-bind', real, real);
    visible.push(real);
  }
  const hidden = [...new Set(view.hidden.map(realOrUndefined).filter((p): p is string => p !== undefined))].sort((a, b) => a.length - b.length);
  const masked: string[] = [];
  if (workspace !== undefined) {
    const holders = hidden.filter((h) => within(workspace, h));
    const areas = (view.workspaceAreas ?? []).map(realOrUndefined).filter((p): p is string => p !== undefined);
    if (holders.length > 0 && !areas.some((area) => within(workspace, area) && workspace !== area)) {
      throw new SandboxRefusal(`the workspace ${workspace} lies inside ${holders[0]}, which the sandbox hides`);
    }
    // A worktree under the state dir: the folders holding it are masked first, then it is bound on top.
    // (read-only only after the bind: its mount point is made in the empty folder.)
    const before = masked.length;
    for (const holder of holders) mask(holder, visible, masked, args, false);
    args.push('--bind', workspace, workspace, '--chdir', workspace);
    for (const holder of masked.slice(before)) args.push('--remount-ro', holder);
    visible.push(workspace);
    for (const [source, target] of gitCommonDirMounts(workspace, hidden)) {
      args.push('--ro-bind', source, target);
      visible.push(target);
    }
  } else {
    args.push('--chdir', '/');
  }
  // Last: a mask covers whatever bind above would show it; inside a masked folder there is nothing left to mask.
  // (The workspace is bound over any earlier mask: what lies inside it is masked afresh.)
  const inWorkspace: string[] = [];
  for (const path of hidden) {
    if (workspace === undefined) mask(path, visible, masked, args);
    else if (within(path, workspace)) mask(path, visible, inWorkspace, args);
    else if (!within(workspace, path)) mask(path, visible, masked, args);
  }
  return args;
}

/**
 * For a workspace whose `.git` is a file (a linked worktree: `gitdir: <common>/worktrees/<name>`),
 * the common dir to bind read-only, at its real path and at the path the file names if that
 * differs. Nothing when the common dir lies inside a hidden path: a mask always wins.
 */
function gitCommonDirMounts(workspace: string, hidden: readonly string[]): Array<[string, string]> {
  let gitDir: string;
  let common: string;
  try {
    const dotGit = join(workspace, '.git');
    if (!lstatSync(dotGit).isFile()) return [];
    const named = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (named === undefined) return [];
    gitDir = resolve(workspace, named);
    common = resolve(gitDir, readFileSync(join(gitDir, 'commondir'), 'utf8').trim());
  } catch {
    return [];
  }
  const real = realOrUndefined(common);
  if (real === undefined || hidden.some((path) => within(real, path) || within(common, path))) return [];
  return real === common ? [[real, real]] : [[real, real], [real, common]];
}

/** Adds the mask of `path` when a visible folder would show it and no mask covers it yet. */
function mask(path: string, visible: readonly string[], masked: string[], args: string[], readOnly = true): void {
  if (!visible.some((root) => within(path, root)) || masked.some((dir) => within(path, dir))) return;
  if (isDirectory(path)) {
    args.push('--tmpfs', path, ...(readOnly ? ['--remount-ro', path] : []));
    masked.push(path);
  } else {
    args.push('--ro-bind', '/dev/null', path);
  }
}

/** The paths of `names` under `home` (the user's key folders). */
export function homeSecrets(home: string): string[] {
  return HOME_SECRETS.map((name) => `${home}/${name}`);
}

function systemMount(path: string): string[] {
  try {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return ['--symlink', readlinkSync(path), path];
    return ['--ro-bind', path, path];
  } catch {
    return [];
  }
}

/** `path` equals `root` or lies under it. */
function within(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
