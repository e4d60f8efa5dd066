/**
 * The seam of worktree isolation into the service: every provider is registered wrapped in this
 * (service/provider-registry.ts's `decorate`). A start without worktree isolation passes through
 * untouched. One with it gets its worktree first (worktree-manager.ts), and the inner provider
 * sees a request whose `parent.cwd` is the parent's cwd's place inside the worktree: the file
 * tools, run_shell's writable dir, an ACP agent's process and `session/new` cwd all follow it.
 * Each turn's result carries `worktree` (its changes committed on the branch); disposing the
 * chain's latest run applies the cleanup rule, unless the daemon is shutting down (a child kept
 * for the next daemon keeps its worktree; one it cannot continue is found as an orphan).
 *
 * Cluster mode (`carried`): the providers the service holds are stand-ins that queue the start, and
 * the worktree must be made where the run executes, from that member's checkout. `decorate` then
 * only settles the mode (the front's `worktrees.providers` defaults) and passes it on in the
 * queued request; the executing member wraps its real providers with `isolate`, which builds the
 * worktree on its own disk and records it in its own state dir (docs/cluster.md#worktree-starts).
 *
 * The git machinery loads at the first isolated start: a daemon that never isolates never pays.
 */
import { existsSync } from '../../common/node-builtins.js';
import { boundDiagnostic, SubagentError, type ContentBlock, type Isolation, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonResumeOptions, DaemonRun, ProviderStartRequest, RestoreContext, RunHost } from '../provider.js';
import type { WorktreeManager, WorktreeSettings } from './worktree-manager.js';
import type { WorktreeRecord } from './worktree-records.js';

export interface IsolationOptions extends WorktreeSettings {
  /** Default isolation per provider name (config `worktrees.providers`); otherwise `none`. */
  readonly defaults?: Readonly<Record<string, Isolation>>;
  /** Cluster mode: the worktree is made on the member that executes the run (`isolate`), not here. */
  readonly carried?: boolean;
  /** Whether the daemon is shutting down: its disposals are no cleanup. */
  readonly shuttingDown: () => boolean;
}

/** The executing side of a cluster member (`isolate`). */
export interface ExecutingMember {
  /** This member's id: its records say which member made them (orphaned by its next life). */
  readonly member: string;
  /** Whether the dispose of `runId` keeps the child for a later life of its front (no cleanup). */
  keeps(runId: string): boolean;
}

/** One isolated child: its worktree and the run of its chain that is latest. */
interface Chain {
  readonly name: string;
  readonly label: string | undefined;
  latest: DaemonRun | undefined;
}

export class WorktreeIsolation {
  private manager: Promise<WorktreeManager> | undefined;

  constructor(private readonly options: IsolationOptions) {}

  /** The manager, loaded on first use. */
  worktrees(): Promise<WorktreeManager> {
    this.manager ??= import('./worktree-manager.js').then(({ WorktreeManager }) => new WorktreeManager(this.options));
    return this.manager;
  }

  /** What the service registers: every provider, wrapped (in cluster mode, the stand-ins). */
  decorate = (inner: DaemonProvider): DaemonProvider => this.wrapProvider(inner, undefined);

  /** A cluster member's real provider, as it executes runs from the queue: the worktree is made here. */
  isolate = (inner: DaemonProvider, executing: ExecutingMember): DaemonProvider => this.wrapProvider(inner, executing);

  /**
   * At a cluster member's start: worktrees a previous life of this member made for the pool's
   * runs, still running or settled, have nobody to continue or dispose them any more (a
   * continuation is pinned to the member that held the child): orphaned, for `worktrees prune`.
   */
  async orphanPoolWorktrees(member: string): Promise<string[]> {
    if (!existsSync(this.options.stateWorktrees)) return [];
    const manager = await this.worktrees();
    return manager.orphanOthers(member);
  }

  private wrapProvider(inner: DaemonProvider, executing: ExecutingMember | undefined): DaemonProvider {
    const wrapped: DaemonProvider = {
      get name() {
        return inner.name;
      },
      get capabilities() {
        return inner.capabilities;
      },
      get inheritsParentContext() {
        return inner.inheritsParentContext;
      },
      get runtime() {
        return inner.runtime;
      },
      start: (request) => (this.isolates(inner, request, executing) ? this.start(inner, request, executing) : passThrough(inner, request)),
      ...(inner.restore && { restore: (childId: string, context: RestoreContext) => this.restore(inner, childId, context, executing) }),
      ...(inner.processes && { processes: () => inner.processes!() }),
      ...(inner.close && { close: () => inner.close!() }),
    };
    return wrapped;
  }

  /**
   * Whether `start` has anything to do for this start: it asks for isolation fields, or its
   * provider has a default other than none (never on the executing member: the front settled it).
   * Most starts do not, and go to the provider as they came: no copy, no extra turn.
   */
  private isolates(inner: DaemonProvider, request: ProviderStartRequest, executing: ExecutingMember | undefined): boolean {
    return request.isolation !== undefined || (executing === undefined && (this.options.defaults?.[inner.name] ?? 'none') !== 'none');
  }

  private async start(inner: DaemonProvider, request: ProviderStartRequest, executing: ExecutingMember | undefined): Promise<DaemonRun> {
    const { isolation: asked, ...plain } = request;
    // The front settled the mode (with its defaults) and sent it: the executing member adds none.
    const mode = asked?.isolation ?? (executing ? undefined : this.options.defaults?.[inner.name]) ?? 'none';
    if (mode === 'none') {
      if (asked?.baseRef !== undefined || asked?.includeUncommitted !== undefined || asked?.cleanup !== undefined) {
        throw new SubagentError('INVALID_REQUEST', 'baseRef, includeUncommitted and cleanup apply only with isolation "worktree"', { field: '/isolation' });
      }
      return inner.start(plain);
    }
    if (this.options.carried && !executing) return inner.start({ ...plain, isolation: { ...asked, isolation: 'worktree' } });
    const manager = await this.worktrees();
    const record = await manager.create({
      runId: request.host.runId,
      ...(executing && { member: executing.member }),
      provider: inner.name,
      parentCwd: request.parent.cwd,
      ...(request.label !== undefined && { label: request.label }),
      ...(asked?.baseRef !== undefined && { baseRef: asked.baseRef }),
      ...(asked?.includeUncommitted !== undefined && { includeUncommitted: asked.includeUncommitted }),
      ...(asked?.cleanup !== undefined && { cleanup: asked.cleanup }),
    });
    let run: DaemonRun;
    try {
      run = await inner.start({ ...plain, parent: { ...plain.parent, cwd: record.cwd } });
    } catch (error) {
      await manager.discard(record).catch((failure: unknown) => request.host.log.warn({ err: failure, worktree: record.path }, 'could not remove the worktree of a failed start'));
      throw error;
    }
    manager.update(record.name, { childId: run.id });
    return this.wrap(run, { name: record.name, label: request.label, latest: undefined }, request.host, manager, executing);
  }

  private async restore(inner: DaemonProvider, childId: string, context: RestoreContext, executing: ExecutingMember | undefined): Promise<DaemonRun> {
    const run = await inner.restore!(childId, context);
    // A stand-in's child lives on the member that executes it, with its worktree's record.
    if (this.options.carried && !executing) return run;
    const manager = await this.worktrees();
    const record: WorktreeRecord | undefined = manager.records.byChild(childId);
    if (!record) return run;
    return this.wrap(run, { name: record.name, label: record.label, latest: undefined }, context.host, manager, executing);
  }

  private wrap(run: DaemonRun, chain: Chain, host: RunHost, manager: WorktreeManager, executing: ExecutingMember | undefined): DaemonRun {
    const runId = host.runId;
    const result = run.result.then((outcome) => this.finish(outcome, chain, runId, host, manager));
    const wrapped: DaemonRun = {
      get id() {
        return run.id;
      },
      get localAgent() {
        return run.localAgent;
      },
      get worker() {
        return run.worker;
      },
      result,
      dispose: async () => {
        await run.dispose();
        await result.catch(() => undefined);
        if (chain.latest !== wrapped || this.options.shuttingDown() || executing?.keeps(host.runId)) return;
        await manager.release(chain.name).catch((error: unknown) => host.log.warn({ err: error, worktree: chain.name }, 'worktree cleanup failed'));
      },
      ...(run.sendMessage && { sendMessage: (content: ContentBlock[]) => run.sendMessage!(content) }),
      ...(run.interrupt && { interrupt: (level) => run.interrupt!(level) }),
      ...(run.resume && {
        resume: async (content: ContentBlock[], options?: DaemonResumeOptions) => {
          const next = await run.resume!(content, options);
          // The service re-armed the chain's host with the continuation's run id before this call.
          manager.turnStarted(chain.name, host.runId);
          return this.wrap(next, chain, host, manager, executing);
        },
      }),
    };
    chain.latest = wrapped;
    return wrapped;
  }

  /** A turn's outcome plus what it changed in the worktree; a git failure is named in the diagnostic, never a lost result. */
  private async finish(outcome: SubagentResult, chain: Chain, runId: string, host: RunHost, manager: WorktreeManager): Promise<SubagentResult> {
    try {
      return { ...outcome, worktree: await manager.finishTurn(chain.name, runId, chain.label) };
    } catch (error) {
      host.log.warn({ err: error, worktree: chain.name }, 'could not commit the worktree');
      const note = `the worktree's changes could not be committed: ${(error as Error).message}`;
      return { ...outcome, diagnostic: boundDiagnostic(outcome.diagnostic ? `${note}; ${outcome.diagnostic}` : note) };
    }
  }
}

/** A start with no isolation, unchanged; a provider that throws instead of rejecting still rejects, as through `start`. */
function passThrough(inner: DaemonProvider, request: ProviderStartRequest): Promise<DaemonRun> {
  try {
    return inner.start(request);
  } catch (error) {
    return Promise.reject(error as Error);
  }
}
