/**
 * The worktrees of isolated children, from creation to removal.
 *
 * Rules stated here:
 * - A worktree is made of the repository holding the parent's cwd, at its HEAD or `baseRef`, on
 *   a new branch `subagentd/<label-slug>-<short run id>`, in the worktrees folder; the child's
 *   cwd is the parent's cwd's place inside it. A cwd in no repository, or an unknown `baseRef`,
 *   is INVALID_REQUEST before anything is made.
 * - The parent's uncommitted changes stay out unless `includeUncommitted`; the outcome says which.
 * - At each turn's end everything in the worktree is committed on its branch (message naming the
 *   run and its label), unless `commit` is off; the outcome counts the changes from its start.
 * - At dispose (`release`): `auto` removes the worktree, and its branch too when the child changed
 *   nothing; a worktree left with uncommitted changes is kept. `keep` keeps both, `always` drops both.
 * - Changes to one repository's worktrees (add, remove, branch delete) run one at a time: git
 *   locks shared files (packed-refs, the worktrees list) and refuses a second writer.
 */
import { mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { SubagentError, type WorktreeCleanup, type WorktreeOutcome } from '../../protocol/index.js';
import { isoTime } from '../../common/iso-time.js';
import {
  addWorktree,
  branchCommit,
  carryUncommitted,
  deleteBranch,
  hasUncommitted,
  headOf,
  isValidBranchName,
  listWorktreePaths,
  locateRepo,
  mergeBranch,
  removeWorktree,
  resolveCommit,
  stageAll,
  stagedChanges,
  type MergeOutcome,
} from './worktree-git.js';
import { WorktreeRecords, type WorktreeRecord } from './worktree-records.js';

export interface WorktreeSettings {
  /** The state dir's worktrees folder (records live there). */
  readonly stateWorktrees: string;
  /** Where worktrees are made (default: the state dir's worktrees folder). */
  readonly dir?: string;
  /** Commit a turn's changes on the branch at its end (default true). */
  readonly commit?: boolean;
  /** The cleanup rule when a start names none (default `auto`). */
  readonly cleanup?: WorktreeCleanup;
}

export interface CreateRequest {
  readonly runId: string;
  /** The cluster member making it for a pool's run (isolating-provider.ts's `isolate`). */
  readonly member?: string;
  readonly provider: string;
  readonly label?: string;
  readonly parentCwd: string;
  readonly baseRef?: string;
  readonly includeUncommitted?: boolean;
  readonly cleanup?: WorktreeCleanup;
}

export interface ListedWorktree extends WorktreeRecord {
  /** Whether `git worktree list` of the repository still shows it. */
  readonly present: boolean;
  readonly branchExists: boolean;
}

export class WorktreeManager {
  readonly records: WorktreeRecords;
  private readonly dir: string;
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly settings: WorktreeSettings) {
    this.records = new WorktreeRecords(settings.stateWorktrees);
    this.dir = settings.dir ?? settings.stateWorktrees;
  }

  async create(request: CreateRequest): Promise<WorktreeRecord> {
    const repo = await locateRepo(request.parentCwd);
    if (!repo) {
      throw new SubagentError('INVALID_REQUEST', `isolation "worktree" needs a git repository, and parent.cwd ${request.parentCwd} is not inside one`, {
        field: '/parent/cwd',
      });
    }
    const baseRef = request.baseRef ?? 'HEAD';
    const baseCommit = await resolveCommit(repo.root, baseRef);
    if (!baseCommit) {
      const what = request.baseRef === undefined ? `the repository at ${repo.root} has no commit yet (HEAD)` : `baseRef "${baseRef}" names no commit in ${repo.root}`;
      throw new SubagentError('INVALID_REQUEST', `cannot make a worktree: ${what}`, { field: request.baseRef === undefined ? '/parent/cwd' : '/baseRef' });
    }
    const name = `${slug(request.label)}-${request.runId.replace(/^run_/, '').slice(0, 8)}`;
    const branch = `subagentd/${name}`;
    if (!(await isValidBranchName(repo.root, branch))) throw new SubagentError('INVALID_REQUEST', `cannot make a branch named ${branch}`, { field: '/label' });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Real: `git worktree list` shows real paths, and the record must match what it shows.
    const path = join(realpathSync(this.dir), name);
    const dirty = await hasUncommitted(repo.root);
    const carry = dirty && request.includeUncommitted === true;
    await this.serial(repo.commonDir, () => addWorktree(repo.root, path, branch, baseCommit));
    let startCommit = baseCommit;
    try {
      if (carry) {
        await carryUncommitted(repo.root, path);
        if (await stageAll(path, `subagentd: the parent's uncommitted changes, carried into ${name}`)) startCommit = await headOf(path);
      }
    } catch (error) {
      await this.drop(repo.root, repo.commonDir, path, branch);
      throw new SubagentError('START_FAILED', `could not carry the parent's uncommitted changes into the worktree: ${(error as Error).message}`);
    }
    const record: WorktreeRecord = {
      name,
      runIds: [request.runId],
      ...(request.member !== undefined && { member: request.member }),
      provider: request.provider,
      ...(request.label !== undefined && { label: request.label }),
      parentRoot: repo.root,
      path,
      cwd: join(path, repo.prefix),
      branch,
      baseRef,
      baseCommit,
      startCommit,
      ...(dirty && { parentUncommitted: carry ? 'carried' : 'left' }),
      cleanup: request.cleanup ?? this.settings.cleanup ?? 'auto',
      commit: this.settings.commit ?? true,
      state: 'running',
      createdAt: isoTime(),
    };
    this.records.put(record);
    return record;
  }

  /** The start failed after the worktree was made: it goes, branch and all. */
  async discard(record: WorktreeRecord): Promise<void> {
    const repo = await locateRepo(record.parentRoot);
    await this.drop(record.parentRoot, repo?.commonDir ?? record.parentRoot, record.path, record.branch);
    this.records.remove(record.name);
  }

  update(name: string, patch: Partial<Pick<WorktreeRecord, 'childId' | 'state' | 'runIds'>>): WorktreeRecord | undefined {
    const current = this.records.get(name);
    if (!current) return undefined;
    const next = { ...current, ...patch };
    this.records.put(next);
    return next;
  }

  /** A continuation of the child began as run `runId`. */
  turnStarted(name: string, runId: string): void {
    const current = this.records.get(name);
    if (current) this.update(name, { state: 'running', runIds: [...current.runIds, runId] });
  }

  /** A turn ended: commit its changes (unless `commit` is off) and say what the child changed. */
  async finishTurn(name: string, runId: string, label: string | undefined): Promise<WorktreeOutcome> {
    const record = this.records.get(name);
    if (!record) throw new Error(`no record of worktree ${name}`);
    const message = record.commit ? `subagentd: run ${runId}${label ? ` (${label})` : ''}` : undefined;
    const committed = await stageAll(record.path, message);
    const { count } = await stagedChanges(record.path, record.startCommit);
    this.update(name, { state: 'settled' });
    return {
      path: record.path,
      branch: record.branch,
      baseRef: record.baseRef,
      baseCommit: record.baseCommit,
      headCommit: await headOf(record.path),
      changed: count,
      committed: record.commit || committed,
      ...(record.parentUncommitted && { parentUncommitted: record.parentUncommitted }),
    };
  }

  /** The child is disposed: apply its cleanup rule. Returns what stayed on disk. */
  async release(name: string): Promise<{ worktree: boolean; branch: boolean }> {
    const record = this.records.get(name);
    if (!record) return { worktree: false, branch: false };
    const kept = await this.applyCleanup(record);
    if (kept.worktree) this.update(name, { state: 'kept' });
    else if (kept.branch) this.update(name, { state: 'disposed' });
    else this.records.remove(name);
    return kept;
  }

  private async applyCleanup(record: WorktreeRecord): Promise<{ worktree: boolean; branch: boolean }> {
    if (record.cleanup === 'keep') return { worktree: true, branch: true };
    const repo = await locateRepo(record.parentRoot);
    const commonDir = repo?.commonDir ?? record.parentRoot;
    const exists = (await listWorktreePaths(record.parentRoot).catch((): string[] => [])).includes(record.path);
    if (record.cleanup === 'always') {
      await this.drop(record.parentRoot, commonDir, record.path, record.branch);
      return { worktree: false, branch: false };
    }
    // auto: uncommitted work is never thrown away; a branch that moved is the child's result.
    if (exists && (await hasUncommitted(record.path).catch(() => false))) return { worktree: true, branch: true };
    const head = await branchCommit(record.parentRoot, record.branch);
    const changed = head !== undefined && head !== record.startCommit;
    await this.serial(commonDir, async () => {
      if (exists) await removeWorktree(record.parentRoot, record.path);
      if (!changed) await deleteBranch(record.parentRoot, record.branch);
    });
    return { worktree: false, branch: changed };
  }

  private async removeOnly(record: WorktreeRecord): Promise<{ worktree: boolean; branch: boolean }> {
    const repo = await locateRepo(record.parentRoot);
    await this.serial(repo?.commonDir ?? record.parentRoot, async () => {
      if ((await listWorktreePaths(record.parentRoot).catch((): string[] => [])).includes(record.path)) await removeWorktree(record.parentRoot, record.path);
    });
    return { worktree: false, branch: true };
  }

  /** At start: the worktrees of runs a dead daemon left running have nobody to dispose them. */
  markOrphans(interruptedRunIds: ReadonlySet<string>): string[] {
    const orphaned: string[] = [];
    for (const record of this.records.all()) {
      const last = record.runIds.at(-1);
      if (record.state === 'running' && last !== undefined && interruptedRunIds.has(last)) {
        this.update(record.name, { state: 'orphaned' });
        orphaned.push(record.name);
      }
    }
    return orphaned;
  }

  /**
   * At a cluster member's start: the worktrees a previous life of this member made for the pool
   * (recorded with another member id), running or settled, have nobody left to continue or
   * dispose them. Returns their names.
   */
  orphanOthers(member: string): string[] {
    const orphaned: string[] = [];
    for (const record of this.records.all()) {
      if (record.member === undefined || record.member === member || (record.state !== 'running' && record.state !== 'settled')) continue;
      this.update(record.name, { state: 'orphaned' });
      orphaned.push(record.name);
    }
    return orphaned;
  }

  /** Every recorded worktree, with whether git still lists it and whether its branch exists. */
  async list(): Promise<ListedWorktree[]> {
    const listed: ListedWorktree[] = [];
    for (const record of this.records.all()) {
      const paths = await listWorktreePaths(record.parentRoot).catch((): string[] => []);
      const branch = await branchCommit(record.parentRoot, record.branch).catch(() => undefined);
      listed.push({ ...record, present: paths.includes(record.path), branchExists: branch !== undefined });
    }
    return listed;
  }

  /** Removes orphaned worktrees by their cleanup rule (`keep` ones are removed with their branch kept). */
  async prune(): Promise<Array<{ name: string; runId: string; branchKept: boolean }>> {
    const pruned: Array<{ name: string; runId: string; branchKept: boolean }> = [];
    for (const record of this.records.all()) {
      // A disposed child's record stays for its branch; once that branch is gone, so is it.
      if (record.state === 'disposed' && (await branchCommit(record.parentRoot, record.branch).catch(() => undefined)) === undefined) this.records.remove(record.name);
      if (record.state !== 'orphaned') continue;
      // An orphan's own commit never happened: its work is committed now, so the branch holds it.
      const exists = (await listWorktreePaths(record.parentRoot).catch((): string[] => [])).includes(record.path);
      if (exists && record.commit && record.cleanup !== 'always') await stageAll(record.path, `subagentd: run ${record.runIds.at(-1)} (interrupted)`).catch(() => false);
      // `keep` keeps the branch whatever it holds; the worktree of an orphan goes in every case.
      const kept = record.cleanup === 'keep' ? await this.removeOnly(record) : await this.applyCleanup(record);
      if (kept.worktree) continue; // uncommitted changes (commit off): left for the user
      if (kept.branch) this.update(record.name, { state: 'disposed' });
      else this.records.remove(record.name);
      pruned.push({ name: record.name, runId: record.runIds.at(-1) ?? '', branchKept: kept.branch });
    }
    return pruned;
  }

  /** `worktrees merge RUN`: the run's branch into the parent checkout's current branch. */
  async merge(runId: string): Promise<MergeOutcome & { record: WorktreeRecord }> {
    const record = this.records.byRun(runId);
    if (!record) throw new SubagentError('UNKNOWN_RUN', `no worktree is recorded for run ${runId}`, { field: '/runId' });
    if ((await branchCommit(record.parentRoot, record.branch)) === undefined) {
      throw new SubagentError('RUN_STATE', `branch ${record.branch} of run ${runId} no longer exists`);
    }
    const outcome = await mergeBranch(record.parentRoot, record.branch, `Merge ${record.branch} (subagentd run ${runId}${record.label ? `: ${record.label}` : ''})`);
    return { ...outcome, record };
  }

  /** Worktree and branch both gone. */
  private async drop(root: string, commonDir: string, path: string, branch: string): Promise<void> {
    await this.serial(commonDir, async () => {
      if ((await listWorktreePaths(root).catch((): string[] => [])).includes(path)) await removeWorktree(root, path);
      await deleteBranch(root, branch);
    });
  }

  /** Runs `task` after every earlier task of the same repository. */
  private serial<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    const settled = next.catch(() => undefined);
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return next;
  }
}

/** The label as a branch-name component: lower-case words joined by `-`, at most 40 characters. */
export function slug(label: string | undefined): string {
  const words = (label ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  return words === '' ? 'child' : words;
}

