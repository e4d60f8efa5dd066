/**
 * A member of a cluster: this daemon joined to the pool on a NATS server (`daemon --nats URL`).
 * `join` connects (CLUSTER_UNAVAILABLE, naming the URL, when it cannot), creates or opens the
 * queue, the run records and the session stream, and wraps the daemon's providers so starts go
 * to the shared queue (cluster-provider.ts), those registered later too (`adopt`: a reload's
 * ACP providers); `start` begins executing runs from the queue
 * (cluster-worker.ts); `ledger` gives the service a ledger that answers for every run of the
 * pool (cluster-ledger.ts); `isolateWith` makes worktree starts here, on the executing member; `startKeys` the pool's idempotency keys (pool-start-keys.ts), whose
 * window also bounds how long a start its dead front left queued stays parked (parked-starts.ts); `close` lets go of what executes here (another member continues it) and
 * disconnects.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { DaemonProvider } from '../provider.js';
import type { LocalLedger } from '../store/local-ledger.js';
import type { RunLedger } from '../store/run-ledger.js';
import { AnswerWrites } from './answer-writes.js';
import { ClusterLedger } from './cluster-ledger.js';
import { clusterProvider, type FrontContext } from './cluster-provider.js';
import type { ClusterRun, WorkerRef } from './cluster-run.js';
import { ClusterWorker, type ExecutionObserver, type IsolateProvider } from './cluster-worker.js';
import { DEFAULT_IDEMPOTENCY_WINDOW_MS } from '../idempotency/start-keys.js';
import { DEFAULT_RUN_RETENTION } from '../store/run-retention.js';
import { sweepParked } from './parked-starts.js';
import { sweepRecords } from './record-retention.js';
import { PoolStartKeys } from './pool-start-keys.js';
import { MemberRelay } from './member-relay.js';
import { NatsLink } from './nats-link.js';
import { clusterNames, type ClusterNames } from './names.js';
import { RunRecords } from './run-records.js';
import { ClusterScheduler } from './scheduler.js';
import { SessionEvents } from './session-events.js';
import { DEFAULT_ACK_WAIT_MS, SlotQueue } from './slot-queue.js';
import { WorkspaceGate, WorkspaceIdentities } from './workspace.js';
import { DEFAULT_WORKSPACE_WAIT_MS } from './workspace-survey.js';

export interface ClusterOptions {
  /** `nats://host:port` of the shared server. */
  readonly url: string;
  /** limits.maxConcurrentRuns: the cap across every member. */
  readonly cap: number;
  /** The lease; a silent member's runs move after it (default 15 s). */
  readonly ackWaitMs?: number;
  /** Runs this member executes at once (default: the cap). */
  readonly slots?: number;
  /** Names of the streams and bucket (default `subagentd`); members of one pool share it. */
  readonly prefix?: string;
  readonly sessionsDir: string;
  readonly log: Logger;
  readonly maxOutputBytes?: number;
  /** This member's id (default: a fresh random one, like a daemon epoch). */
  readonly memberId?: string;
  /** limits.idempotencyWindowMs: how long the pool remembers a start's idempotency key (default 10 minutes). */
  readonly idempotencyWindowMs?: number;
  /** The roots of the workspaces this member serves (default: any cwd that exists here). */
  readonly workspaces?: readonly string[];
  /** How long a start waits for a live member serving its workspace before WORKSPACE_UNAVAILABLE (default 10 s). */
  readonly workspaceWaitMs?: number;
  /** retention.runs.maxAgeDays: how long a settled run's pool record is kept (default 30 days; record-retention.ts). */
  readonly runRetentionDays?: number;
}

export class Cluster {
  private constructor(
    readonly worker: WorkerRef,
    readonly link: NatsLink,
    readonly names: ClusterNames,
    readonly scheduler: ClusterScheduler,
    private readonly relay: MemberRelay,
    private readonly executor: ClusterWorker,
    private readonly front: FrontContext,
    private readonly stopFollowing: () => void,
    private readonly log: Logger,
    /** The real providers this member executes runs of (the worker reads it at every pick). */
    private readonly local: Map<string, DaemonProvider>,
    /** The stand-ins the service holds, by name (a re-attached run offers what its stand-in does). */
    private readonly standIns: Map<string, DaemonProvider>,
    /** The pool's idempotency keys, for the service (pool-start-keys.ts). */
    readonly startKeys: PoolStartKeys,
  ) {}

  static async join(options: ClusterOptions, providers: readonly DaemonProvider[]): Promise<Cluster> {
    const gate = new WorkspaceGate(options.workspaces);
    const worker: WorkerRef = { id: options.memberId ?? randomBytes(9).toString('base64url'), host: hostname(), pid: process.pid, workspaces: [...gate.roots] };
    const link = await NatsLink.open(options.url, { name: `subagentd ${worker.id}` });
    try {
      const names = clusterNames(options.prefix);
      const records = await RunRecords.open<ClusterRun>(link, names.recordsBucket);
      const queue = await SlotQueue.open(link, names, { cap: options.cap, ackWaitMs: options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS });
      const sessions = await SessionEvents.open(link, names);
      const scheduler = new ClusterScheduler(records, queue, worker);
      const relay = new MemberRelay(link, names, worker.id);
      const followers = new Map<string, Set<(record: ClusterRun) => void>>();
      const standIns = new Map<string, DaemonProvider>();
      const stopFollowing = records.onChange((record) => {
        for (const listener of followers.get(record.runId) ?? []) listener(record);
      });
      const front: FrontContext = {
        leaving: () => false,
        runtimeOf: (provider) => standIns.get(provider)?.runtime,
        startsHere: new Map(),
        localStarts: new Map(),
        answerWrites: new AnswerWrites(),
        workspaces: new WorkspaceIdentities(),
        workspaceWaitMs: options.workspaceWaitMs ?? DEFAULT_WORKSPACE_WAIT_MS,
        adoptions: new Set(),
        link,
        names,
        scheduler,
        relay,
        follow(runId, listener) {
          let set = followers.get(runId);
          if (!set) followers.set(runId, (set = new Set()));
          set.add(listener);
          return () => {
            set.delete(listener);
            if (set.size === 0) followers.delete(runId);
          };
        },
      };
      const local = new Map(providers.map((p) => [p.name, p]));
      const executor = new ClusterWorker(link, names, scheduler, relay, sessions, local, {
        slots: options.slots ?? options.cap,
        gate,
        sessionsDir: options.sessionsDir,
        log: options.log.child({ cluster: worker.id }),
        ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }),
      });
      front.controlHere = (runId, message) => executor.controlHere(runId, message);
      front.lentTicket = (parentRunId) => executor.lentTicket(parentRunId);
      front.executeLent = (record, cancel) => executor.executeLent(record, cancel);
      front.executionSlots = () => executor.slotsHeld();
      front.startHere = (record, cancel) => executor.localStarts.startHere(record, cancel);
      const windowMs = options.idempotencyWindowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS;
      const startKeys = await PoolStartKeys.open(link, names, windowMs, records, relay, front.adoptions);
      const sweepLog = options.log.child({ cluster: worker.id });
      const stopSweepingParked = sweepParked(records, windowMs, sweepLog);
      const stopSweepingOld = sweepRecords(records, (options.runRetentionDays ?? DEFAULT_RUN_RETENTION.maxAgeDays) * 86_400_000, sweepLog);
      executor.startedHere = (runId, childId, startedAt) => front.startsHere.get(runId)?.started(childId, startedAt);
      executor.failedHere = (runId, error) => front.startsHere.get(runId)?.failed(error);
      executor.settledHere = (runId, outcome) => front.answerWrites.offer(runId, outcome);
      link.onChange((online) => options.log[online ? 'info' : 'warn']({ url: options.url }, online ? 'cluster: NATS reconnected' : 'cluster: NATS connection lost; refusing new runs until it is back'));
      const stop = (): void => (stopFollowing(), stopSweepingParked(), stopSweepingOld());
      return new Cluster(worker, link, names, scheduler, relay, executor, front, stop, options.log.child({ cluster: worker.id }), local, standIns, startKeys);
    } catch (error) {
      await link.close();
      throw error;
    }
  }

  /** The daemon's providers as the service should register them: starts go to the queue. */
  wrap(providers: readonly DaemonProvider[]): DaemonProvider[] {
    return providers.map((provider) => this.standIn(provider));
  }

  private standIn(provider: DaemonProvider): DaemonProvider {
    const standIn = clusterProvider(provider, this.front);
    this.standIns.set(provider.name, standIn);
    return standIn;
  }

  /**
   * A provider registered after start (an ACP provider of a reload) joins the pool as the
   * configured ones did: the service gets its stand-in, and this member takes its runs from the
   * queue until `release` (the next reload), after which runs already executing here go on and
   * queued ones wait for a member that has it.
   */
  adopt(provider: DaemonProvider): { provider: DaemonProvider; release(): void } {
    this.local.set(provider.name, provider);
    return {
      provider: this.standIn(provider),
      release: () => {
        if (this.local.get(provider.name) === provider) this.local.delete(provider.name);
      },
    };
  }

  /** The service's ledger on this member: the daemon's own, plus every run of the pool (cluster-ledger.ts). */
  ledger(local: LocalLedger): RunLedger {
    return new ClusterLedger(local, this.front, this.worker, this.log);
  }

  /**
   * `stopping` says when the member's service is shutting down: from then on the settled runs it
   * disposes stay settled in the pool (their executing members only release them).
   */
  stopsWith(stopping: () => boolean): void {
    this.front.leaving = stopping;
  }

  /**
   * Worktree starts: the runs this member executes get their worktree here, from its own
   * checkout (`isolate` wraps each real provider; daemon/worktrees/isolating-provider.ts).
   */
  isolateWith(isolate: IsolateProvider): void {
    this.executor.isolateWith(isolate);
  }

  /** Tracing: each run executed on this member is heard begin and end (daemon/telemetry/tracing.ts). */
  observeExecutions(observer: ExecutionObserver): void {
    this.executor.observeExecution = observer;
  }

  /** Begin executing runs from the shared queue. */
  start(): void {
    this.executor.start();
  }

  get executing(): number {
    return this.executor.busy;
  }

  async close(): Promise<void> {
    await this.executor.close();
    this.scheduler.queue.close();
    this.stopFollowing();
    this.relay.close();
    this.scheduler.records.close();
    await this.link.close();
  }
}
