/**
 * One ACP provider's agent processes: the warm ones kept ahead of starts, and a count of those
 * serving runs.
 *
 * Rules:
 * - `warm: N` keeps N processes spawned and `initialize`d (ready, or still initializing). A start
 *   takes a ready one; once that start is ready (or failed) the provider calls `fill`, so the
 *   replacement's spawn does not compete with the start it replaces. With none ready the start
 *   spawns its own (cold); the pool is refilled all the same.
 * - A used process is disposed when its run chain ends, unless the config declares the agent
 *   reusable (`reuseProcesses`): then a healthy, idle process goes back to the pool while it has
 *   room, for any owner.
 * - Limits: warm processes are not runs, so they take no admission slot (`maxConcurrentRuns`,
 *   `maxRunsPerConnection`). They count toward the provider's `maxProcesses` with those in use:
 *   the pool never refills past it, and a cold start at it is refused with OVERLOADED.
 * - A ready process unused for `warmIdleMs` is stopped and not replaced: the pool goes cold until
 *   the next start refills it. A ready process that dies is dropped the same way.
 * - A warm-up that fails is logged and shown in status (`lastError`); the pool retries on the
 *   next start only, so a broken agent command never spawns in a loop.
 * - `close` (reload or daemon stop) stops every warm process and every warm-up under way; runs in
 *   progress keep their processes, which are disposed (never pooled) when their chains end.
 */
import type { Logger } from 'pino';
import { SubagentError, type AgentProcessesStatus } from '../../../protocol/index.js';
import type { AcpSession } from './acp-session.js';
import type { ResolvedAcpConfig } from './config.js';

export type WarmSpawner = (signal: AbortSignal) => Promise<AcpSession>;

interface Ready {
  readonly session: AcpSession;
  readonly idleTimer: NodeJS.Timeout;
}

export class WarmPool {
  private readonly ready: Ready[] = [];
  private readonly warmups = new Set<Promise<void>>();
  private readonly inUse = new Set<AcpSession>();
  /** Warm processes being stopped (reaped), so `close` can wait for them too. */
  private readonly stopping = new Set<Promise<void>>();
  /** Cold starts admitted whose process is still being spawned or handshaken. */
  private pendingCold = 0;
  private readonly closing = new AbortController();
  private closed = false;
  private counters = { warmStarts: 0, coldStarts: 0, reaped: 0, reused: 0 };
  private lastError: string | undefined;

  constructor(
    private readonly config: ResolvedAcpConfig,
    private readonly spawnWarm: WarmSpawner,
    private readonly log: Logger,
  ) {}

  /** Spawn warm-ups until N are ready or warming (within `maxProcesses`). */
  fill(): void {
    while (!this.closed && this.ready.length + this.warmups.size < this.config.warm && !this.atCap()) this.warmOne();
  }

  /** A ready process for a start, or undefined (the caller goes cold). The caller then calls `fill`. */
  take(): AcpSession | undefined {
    const entry = this.ready.shift();
    if (!entry) return undefined;
    clearTimeout(entry.idleTimer);
    this.inUse.add(entry.session);
    this.counters.warmStarts += 1;
    return entry.session;
  }

  /** Counts a cold start in, or refuses it at `maxProcesses`. Pair with `started` or `ended`. */
  admitCold(): void {
    if (this.atCap()) {
      throw new SubagentError(
        'OVERLOADED',
        `provider "${this.config.name}" is at maxProcesses (${this.config.maxProcesses}): ${this.inUse.size + this.pendingCold} in use, ${this.ready.length + this.warmups.size} warm`,
      );
    }
    this.pendingCold += 1;
    this.counters.coldStarts += 1;
  }

  /** A cold start's outcome: its session now counts as in use, or (undefined) it failed. */
  coldStarted(session: AcpSession | undefined): void {
    this.pendingCold -= 1;
    if (session) this.inUse.add(session);
  }

  /** A run chain is over: dispose its process, or pool it again when the agent is reusable. */
  async ended(session: AcpSession): Promise<void> {
    this.inUse.delete(session);
    if (this.config.reuseProcesses && !this.closed && this.ready.length + this.warmups.size < this.config.warm) {
      // A cancelled turn settled locally; the agent answers it before the process is clean.
      const idle = await session.whenIdle(this.config.initializeTimeoutMs).then(
        () => true,
        () => false,
      );
      if (idle && !this.closed && session.release()) {
        this.counters.reused += 1;
        this.addReady(session);
        return;
      }
    }
    await session.dispose();
    // Room under `maxProcesses` may have been what kept the pool short.
    this.fill();
  }

  status(): AgentProcessesStatus {
    return {
      warm: this.config.warm,
      ready: this.ready.length,
      warming: this.warmups.size,
      inUse: this.inUse.size + this.pendingCold,
      ...(this.config.maxProcesses !== undefined && { maxProcesses: this.config.maxProcesses }),
      ...this.counters,
      ...(this.lastError !== undefined && { lastError: this.lastError }),
    };
  }

  /** Stop every warm process and warm-up; resolves once they are reaped. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort();
    const ready = this.ready.splice(0);
    for (const entry of ready) clearTimeout(entry.idleTimer);
    for (const entry of ready) this.stop(entry.session);
    await Promise.allSettled([...this.stopping, ...this.warmups]);
  }

  private atCap(): boolean {
    const max = this.config.maxProcesses;
    return max !== undefined && this.ready.length + this.warmups.size + this.inUse.size + this.pendingCold >= max;
  }

  private warmOne(): void {
    const warmup = this.spawnWarm(this.closing.signal).then(
      (session) => {
        this.warmups.delete(warmup);
        if (this.closed) return session.dispose();
        this.lastError = undefined;
        this.addReady(session);
        return undefined;
      },
      (error: unknown) => {
        this.warmups.delete(warmup);
        if (this.closed) return;
        this.lastError = error instanceof Error ? error.message : String(error);
        this.log.warn({ err: error }, 'warm ACP agent failed to start; the pool refills on the next start');
      },
    );
    this.warmups.add(warmup);
  }

  private addReady(session: AcpSession): void {
    const entry: Ready = {
      session,
      idleTimer: setTimeout(() => {
        if (!this.drop(entry)) return;
        this.counters.reaped += 1;
        this.log.debug({ pid: session.pid, idleMs: this.config.warmIdleMs }, 'warm ACP agent idle too long; stopped');
        this.stop(session);
      }, this.config.warmIdleMs),
    };
    // A warm process does not keep the daemon alive.
    entry.idleTimer.unref();
    this.ready.push(entry);
    void session.exited.then(() => {
      if (this.drop(entry)) this.log.warn({ pid: session.pid }, 'warm ACP agent exited while idle; the pool refills on the next start');
    });
  }

  private stop(session: AcpSession): void {
    const stopped = session.dispose().finally(() => this.stopping.delete(stopped));
    this.stopping.add(stopped);
  }

  /** Removes a ready entry; false when a start took it (or close did) first. */
  private drop(entry: Ready): boolean {
    const at = this.ready.indexOf(entry);
    if (at === -1) return false;
    this.ready.splice(at, 1);
    clearTimeout(entry.idleTimer);
    return true;
  }
}
