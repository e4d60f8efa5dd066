/**
 * The durable record of each worktree the daemon made: one small JSON file per worktree in
 * `<state>/worktrees/records/`, written whole (temp file, then rename), so a kill -9 leaves
 * either the old or the new record. One file each: concurrent children never rewrite a shared
 * file, and `subagentd worktrees` reads them without a daemon.
 *
 * States: `running` (a turn works in it), `settled` (between turns, or done and not yet
 * disposed), `orphaned` (its run was interrupted by a daemon's death: nobody will dispose it),
 * `kept` (disposed, left on disk by its cleanup rule or because it holds uncommitted changes),
 * `disposed` (the worktree removed, its branch kept: `worktrees merge RUN` finds the branch by
 * it). A record goes away with the last of worktree and branch (`worktrees prune` drops those of
 * branches deleted since).
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from '../../common/node-builtins.js';
import { join } from 'node:path';
import type { WorktreeCleanup } from '../../protocol/index.js';

export type WorktreeState = 'running' | 'settled' | 'orphaned' | 'kept' | 'disposed';

export interface WorktreeRecord {
  /** The worktree's name: its folder's and the branch's last component (`<label-slug>-<short run id>`). */
  readonly name: string;
  /** The run that made it, then each continuation's run id, oldest first. */
  readonly runIds: readonly string[];
  /** Cluster mode: the member (this daemon, in one life) that made it for a run of the pool. */
  readonly member?: string;
  /** The child (session) id, once the provider answered: a restored child finds its worktree by it. */
  readonly childId?: string;
  readonly provider: string;
  readonly label?: string;
  /** The top of the parent's checkout (where `worktrees merge` merges into). */
  readonly parentRoot: string;
  /** The worktree's directory, and the child's cwd inside it (the parent's cwd's place). */
  readonly path: string;
  readonly cwd: string;
  readonly branch: string;
  readonly baseRef: string;
  readonly baseCommit: string;
  /** Where the child's own changes start: the base, or the commit of carried uncommitted changes. */
  readonly startCommit: string;
  readonly parentUncommitted?: 'left' | 'carried';
  readonly cleanup: WorktreeCleanup;
  readonly commit: boolean;
  readonly state: WorktreeState;
  readonly createdAt: string;
}

export class WorktreeRecords {
  readonly dir: string;

  constructor(stateWorktrees: string) {
    this.dir = join(stateWorktrees, 'records');
  }

  put(record: WorktreeRecord): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const file = this.file(record.name);
    const temp = `${file}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
    renameSync(temp, file);
  }

  remove(name: string): void {
    rmSync(this.file(name), { force: true });
  }

  get(name: string): WorktreeRecord | undefined {
    try {
      return JSON.parse(readFileSync(this.file(name), 'utf8')) as WorktreeRecord;
    } catch {
      return undefined;
    }
  }

  /** Every readable record; a torn or foreign file is skipped. */
  all(): WorktreeRecord[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const records: WorktreeRecord[] = [];
    for (const entry of names) {
      if (!entry.endsWith('.json')) continue;
      const record = this.get(entry.slice(0, -'.json'.length));
      if (record && typeof record.name === 'string' && Array.isArray(record.runIds)) records.push(record);
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** The record of a run (any run of its chain). */
  byRun(runId: string): WorktreeRecord | undefined {
    return this.all().find((record) => record.runIds.includes(runId));
  }

  byChild(childId: string): WorktreeRecord | undefined {
    return this.all().find((record) => record.childId === childId);
  }

  private file(name: string): string {
    return join(this.dir, `${name}.json`);
  }
}
