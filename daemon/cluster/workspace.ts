/**
 * Where a run may execute: a start's *workspace identity*, computed on the front (the member the
 * client is connected to, which sees the parent's files), and each executing member's verdict on
 * whether its own filesystem holds that workspace. A member claims a run only on a yes, so a
 * child never reads or writes a different checkout that happens to sit at the same path.
 *
 * Identity: the parent's `cwd`; when it is inside a git work tree, its top-level, its `HEAD`
 * commit and its `origin` URL (when set). A member serves it when:
 * - `cwd` is under one of its `cluster.workspaces` roots (default `/`: anywhere) and is a
 *   directory there;
 * - for a git workspace: its own view of `cwd` is in a work tree with the same top-level path,
 *   the same `origin` URL (compared without a trailing `/` or `.git`; a front without one asks
 *   nothing of it), and the parent's `HEAD` commit is in its object store (a per-machine clone
 *   that has not fetched it yet does not serve the run);
 * - for a plain directory (no git on the front): nothing more.
 *
 * Cost: the front reads `HEAD` from the files on every start, again only when they changed
 * (git-head.ts; the git dir, top-level and origin are asked of git once per cwd and kept); a
 * member's verdicts are kept for a few seconds per identity (a clone that fetches the commit is
 * noticed within `NEGATIVE_TTL_MS`).
 */
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { headFromFiles } from './git-head.js';

export interface WorkspaceIdentity {
  readonly cwd: string;
  /** The git top-level of `cwd`, when it is in a work tree. */
  readonly root?: string;
  /** The commit `HEAD` names (absent for a repository without commits). */
  readonly head?: string;
  /** `remote.origin.url`, when set. */
  readonly origin?: string;
}

interface GitPlace {
  readonly root: string;
  readonly gitDir: string;
  readonly commonDir: string;
  readonly origin: string | undefined;
}

const GIT_TIMEOUT_MS = 10_000;

function git(cwd: string, args: readonly string[]): Promise<string | undefined> {
  return new Promise((done) => {
    execFile('git', ['-C', cwd, ...args], { timeout: GIT_TIMEOUT_MS, env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' } }, (error, stdout) =>
      done(error ? undefined : stdout.trim()),
    );
  });
}

/** Top-level, git dir and origin of the work tree holding `cwd`, or undefined outside git. */
async function gitPlace(cwd: string): Promise<GitPlace | undefined> {
  const out = await git(cwd, ['rev-parse', '--show-toplevel', '--absolute-git-dir', '--git-common-dir']);
  const [root, gitDir, common] = out?.split('\n') ?? [];
  if (!root || !gitDir || !common) return undefined;
  const origin = await git(cwd, ['config', '--get', 'remote.origin.url']);
  return { root, gitDir, commonDir: isAbsolute(common) ? common : resolve(cwd, common), origin: origin || undefined };
}

/** `HEAD`'s commit from the files (git-head.ts); git itself when they do not say. */
function readHead(place: GitPlace, cwd: string): string | undefined | Promise<string | undefined> {
  const head = headFromFiles(place);
  if (head !== null) return head;
  return git(cwd, ['rev-parse', '--verify', '-q', 'HEAD']).then((sha) => sha || undefined);
}

/** The front's side: a start's workspace identity (git facts cached per cwd, HEAD read each time). */
export class WorkspaceIdentities {
  private readonly places = new Map<string, Promise<GitPlace | undefined>>();

  async of(cwd: string): Promise<WorkspaceIdentity> {
    let place = this.places.get(cwd);
    if (!place) {
      place = gitPlace(cwd);
      this.places.set(cwd, place);
      // A directory that becomes a repository (or stops being one) is seen again after a while.
      setTimeout(() => this.places.delete(cwd), PLACE_TTL_MS).unref();
    }
    const found = await place;
    if (!found) return { cwd };
    const head = await readHead(found, cwd);
    return { cwd, root: found.root, ...(head && { head }), ...(found.origin && { origin: found.origin }) };
  }
}

const PLACE_TTL_MS = 30_000;
/** How long a member keeps a yes (the checkout could be swapped; rare). */
const POSITIVE_TTL_MS = 30_000;
/** How long a member keeps a no: a clone that fetches the commit serves the run this much later. */
const NEGATIVE_TTL_MS = 1_000;

/** Remote URLs compare equal without a trailing slash or `.git`. */
function sameOrigin(a: string, b: string): boolean {
  const norm = (url: string): string => url.trim().replace(/\/+$/, '').replace(/\.git$/, '');
  return norm(a) === norm(b);
}

/** The member's side: whether this member's filesystem holds a workspace, by identity. */
export class WorkspaceGate {
  /** The roots this member serves, resolved; `/` when configured with none. */
  readonly roots: readonly string[];
  private readonly verdicts = new Map<string, { at: number; ok: Promise<boolean>; settled?: boolean }>();

  constructor(roots: readonly string[] | undefined) {
    this.roots = roots && roots.length > 0 ? roots.map((root) => resolve(root)) : ['/'];
  }

  /** The verdict already known for `identity` (no I/O), or undefined when it must be checked. */
  known(identity: WorkspaceIdentity | undefined): boolean | undefined {
    if (!identity) return true; // a record from before workspaces were checked: anywhere, as then
    const entry = this.fresh(identity);
    return entry?.settled;
  }

  /** Whether this member serves `identity` (checked at most once per TTL). */
  serves(identity: WorkspaceIdentity | undefined): Promise<boolean> {
    if (!identity) return Promise.resolve(true);
    const key = keyOf(identity);
    const cached = this.fresh(identity);
    if (cached) return cached.ok;
    const entry: { at: number; ok: Promise<boolean>; settled?: boolean } = { at: Date.now(), ok: this.check(identity) };
    void entry.ok.then((ok) => {
      entry.settled = ok;
      entry.at = Date.now();
    });
    this.verdicts.set(key, entry);
    if (this.verdicts.size > 4096) this.verdicts.delete(this.verdicts.keys().next().value!);
    return entry.ok;
  }

  private fresh(identity: WorkspaceIdentity): { at: number; ok: Promise<boolean>; settled?: boolean } | undefined {
    const entry = this.verdicts.get(keyOf(identity));
    if (!entry) return undefined;
    if (entry.settled === undefined) return entry; // being checked
    const ttl = entry.settled ? POSITIVE_TTL_MS : NEGATIVE_TTL_MS;
    return Date.now() - entry.at < ttl ? entry : undefined;
  }

  private async check(identity: WorkspaceIdentity): Promise<boolean> {
    const cwd = identity.cwd;
    if (!this.roots.some((root) => within(root, cwd))) return false;
    const info = await stat(cwd).catch(() => undefined);
    if (!info?.isDirectory()) return false;
    if (identity.root === undefined) return true;
    const place = await gitPlace(cwd);
    if (!place || place.root !== identity.root) return false;
    if (identity.origin !== undefined && (place.origin === undefined || !sameOrigin(place.origin, identity.origin))) return false;
    if (identity.head === undefined) return true;
    return (await git(cwd, ['cat-file', '-e', `${identity.head}^{commit}`])) !== undefined;
  }
}

function within(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function keyOf(identity: WorkspaceIdentity): string {
  return `${identity.cwd}\0${identity.root ?? ''}\0${identity.head ?? ''}\0${identity.origin ?? ''}`;
}

/** How a refusal names the workspace. */
export function describeWorkspace(identity: WorkspaceIdentity): string {
  if (identity.root === undefined) return `cwd ${identity.cwd}`;
  const at = identity.head ? ` at commit ${identity.head.slice(0, 12)}` : '';
  const from = identity.origin ? ` (origin ${identity.origin})` : '';
  return `cwd ${identity.cwd} (git repository ${identity.root}${at}${from})`;
}
