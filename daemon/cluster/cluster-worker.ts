/**
 * The executing side of a member: `slots` loops, each taking a run from the shared queue
 * (scheduler.ts) only while this member is connected, running it with the member's own
 * provider, and writing its outcome to the run's record before the ticket is acknowledged.
 *
 * Over 400 lines on purpose: a fresh claim, a local start on a spare, a takeover, a resume and a
 * parked start all end in the same outcome write and ticket acknowledgement (or hand-on as a
 * spare), in one order that the lease rules depend on, and control messages act on the same
 * executions; the paths' own parts live in the modules named below.
 *
 * - A fresh claim starts the child, unless its front member is gone (nobody waits for the start:
 *   it is parked, unstarted, until its client sends it again under its idempotency key through
 *   some member, which adopts it: parked-starts.ts); its events and tool calls go to the owner's member
 *   (member-relay.ts); its session is mirrored to the cluster as it grows (session-mirror.ts).
 * - A takeover (the previous worker went silent) rebuilds the child's session file from the
 *   mirror, restores the child through its provider and tells it to continue (child-restore.ts):
 *   the run keeps its id and completes here. A provider without `restore` (ACP: the agent
 *   process died with its member) cannot migrate: the run ends `error` saying so. A run claimed
 *   before its child existed simply starts.
 * - A continuation (`resumes`) of a child whose previous run executed here, undisposed, resumes
 *   that very child; its messages now speak for the new run. Elsewhere the child is restored from
 *   the mirror, as for a takeover, and given the new message (child-restore.ts). A run pinned to
 *   a member (its child lives in that member's agent process) is taken only by that member. A
 *   continuation that does not hold its child's claim (child-fence.ts) is refused before the
 *   child is touched.
 * - A fresh start whose front is this member hands its child's id to the waiting start
 *   (`startedHere`) instead of writing it: the front writes it with the token's hash, and the
 *   next write here rebases on that. Control messages from a front on this member arrive
 *   directly (`controlHere`), not through NATS.
 * - A local start (local-starts.ts: this member's own client's start, a spare ticket, a free
 *   slot, no run waiting in the queue) executes at once beside the slot loops; its front creates
 *   its record when it answers, carrying the outcome when the child settled before that write
 *   left (answer-writes.ts), and a start that fails first writes nothing. A run's ticket goes
 *   on to local-starts.ts when it settles (`passOn`): kept as a spare, acknowledged once unused.
 * - A worktree start gets its worktree here, from this member's checkout (`isolateWith`: the real
 *   providers wrapped by daemon/worktrees/); its chain is pinned here, and a takeover refuses it
 *   (the tree is on the silent member's disk).
 * - Steering (`send` on the control subject) reaches the child's `sendMessage`; `hold` says
 *   whether the child is still here to be continued; the answer carries the typed error. A
 *   dispose releases the child and, once its outcome is recorded, tells the pool's views it is
 *   disposed (run-records.ts `tell`): the stored record stays settled.
 * - Every record write is a compare-and-set from the revision this member last wrote. A lapsed
 *   lease (no heartbeat confirmed for ack_wait: partitioned) stops the child at once and writes
 *   nothing more: the run now belongs to whoever the server hands the ticket to next, and the
 *   revision fences any late write of ours. So one run never has two live children.
 * - A child that settles while NATS is away keeps its outcome until the link is back: the
 *   session, the record and the acknowledgement are retried for as long as the lease holds.
 * - `close` (daemon stop) stops pulling and lets go of the runs executing here without
 *   recording an outcome: their tickets come back after ack_wait and another member continues them.
 */
import { isoTime } from '../../common/iso-time.js';
import type { Logger } from 'pino';
import { SubagentError, type ContentBlock, type InterruptLevel, type SubagentErrorCode, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonRun, RunHost } from '../provider.js';
import { settledOrAfter } from './answer-writes.js';
import { assertClaimed } from './child-fence.js';
import { ChildRestore } from './child-restore.js';
import { sessionKeyOf, type ClusterRun } from './cluster-run.js';
import type { MemberRelay, RelayTarget, ReportSink } from './member-relay.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { Claim, ClusterScheduler, SlotReservation } from './scheduler.js';
import { Lease, NamedTicket, type Ticket } from './slot-queue.js';
import { leftLent } from './lent-slots.js';
import { LocalStarts } from './local-starts.js';
import type { SessionEvents } from './session-events.js';
import { SessionMirror } from './session-mirror.js';
import { parkedRecord } from './parked-starts.js';
import type { WorkspaceGate } from './workspace.js';
import { answerSurveys } from './workspace-survey.js';

export type ControlMessage =
  | { op: 'cancel' }
  /** `keep`: the front is stopping and keeps the settled run for its next life: release it, record nothing. */
  | { op: 'dispose'; keep?: boolean }
  | { op: 'interrupt'; level: InterruptLevel }
  | { op: 'send'; content: ContentBlock[] }
  /** Whether this member still holds the run's child, to be continued here (a pinned resume asks first). */
  | { op: 'hold' };

/** An execution's logger, made when first read (`it`). */
interface RunLog {
  readonly it: Logger;
}

/** A run this member executes, as its trace sees it (daemon/telemetry/tracing.ts). */
export interface ExecutedRun {
  readonly runId: string;
  readonly provider: string;
  readonly label?: string;
  /** The start's W3C trace context, carried in the run's record. */
  readonly traceparent?: string;
  /** This member and the one the run was started through. */
  readonly member: string;
  readonly front: string;
  readonly attempt: number;
  readonly takeover: boolean;
}

/** Hears a run begin executing here; the function it returns hears how the execution ended. */
export type ExecutionObserver = (run: ExecutedRun) => (outcome: ExecutionOutcome) => void;

/** How an execution here ended: the result's stop reason (`parked`: not run, parked-starts.ts), or the failed start's error code. */
export interface ExecutionOutcome {
  readonly stopReason: string;
  readonly errorCode?: string;
}

/** The executing member's answer to a control message; `absent`: the run does not execute on this member (any more). */
export type ControlAnswer = { ok: true } | { error: { code: SubagentErrorCode; message: string } } | { absent: true };

/** Wraps a real provider for worktree starts (daemon/worktrees/isolating-provider.ts's `isolate`). */
export type IsolateProvider = (provider: DaemonProvider, executing: { readonly member: string; keeps(runId: string): boolean }) => DaemonProvider;

export interface ClusterWorkerOptions {
  /** Runs this member executes at once. */
  readonly slots: number;
  readonly sessionsDir: string;
  readonly log: Logger;
  readonly maxOutputBytes?: number;
  /** Which workspaces this member serves: it claims only runs whose workspace it holds (workspace.ts). */
  readonly gate: WorkspaceGate;
}

/**
 * A child's line to its owner on this member: the host and report sink it was given, and the
 * mirror of its session. A continuation here reuses it, pointed at the new run.
 */
interface Conduit {
  readonly target: RelayTarget;
  readonly host: RunHost;
  readonly report: ReportSink | undefined;
  mirror?: SessionMirror;
}

interface Execution {
  readonly runId: string;
  readonly abort: AbortController;
  /** A spent ticket once the run settled and its ticket went on to the next (spare-tickets.ts). */
  lease: Ticket;
  lost: boolean;
  run?: DaemonRun;
  revision: number;
  record: ClusterRun;
  /** The front on this member is writing the child's id with the token's hash: our next write waits for it. */
  frontWrite?: Promise<void> | undefined;
  /** Told to stop after its step (itself or the parent that lent it its slot): so is every run it starts. */
  stopsAfterStep?: boolean;
  conduit: Conduit;
  /** Resolves once the execution is over here: its outcome recorded (or never to be), its ticket gone on. */
  readonly ended: Promise<void>;
}

/** A claim as executed: under a ticket of its own, or one its waiting parent lent it (lent-slots.ts). */
type Held = Omit<Claim, 'lease'> & { readonly lease: Ticket };

/** A child brought to life for a claim: `stored` session lines are already in the mirror. */
interface Begun {
  readonly run: DaemonRun;
  readonly stored: number;
  readonly conduit: Conduit;
  /** A continuation's child: still held here, or restored from the mirror. */
  readonly from?: 'held' | 'mirror';
}

export class ClusterWorker {
  private readonly stop = new AbortController();
  private readonly executing = new Map<string, Execution>();
  /** Brings back, from the cluster's copy of its session, a child taken over or continued here but not held here. */
  private readonly childRestore: ChildRestore;
  /** This member's own client's starts that execute here at once, on the spare tickets of runs that ended here. */
  readonly localStarts: LocalStarts;
  /** Execution slots promised and not yet executing: a local start creating its record, a loop claiming. */
  private reserved = 0;
  /** Slot loops waiting for a slot to free (this member is full of local starts). */
  private roomWaiters: Array<() => void> = [];
  private loops: Promise<void>[] = [];
  private stopBeating: (() => void) | undefined;
  private unfollowOwners: (() => void) | undefined;
  private stopAnswering: (() => void) | undefined;
  private stopControl: (() => void) | undefined;

  constructor(
    private readonly link: NatsLink,
    private readonly names: ClusterNames,
    private readonly scheduler: ClusterScheduler,
    private readonly relay: MemberRelay,
    private readonly sessions: SessionEvents,
    private readonly providers: ReadonlyMap<string, DaemonProvider>,
    private readonly options: ClusterWorkerOptions,
  ) {
    this.childRestore = new ChildRestore(sessions, options.sessionsDir);
    this.localStarts = new LocalStarts(scheduler, {
      stopping: this.stop.signal,
      online: () => link.online,
      canRun: this.canRun,
      reserve: () => this.slot.take(),
      perform: (claim, cancel) => this.performReserved(claim, cancel),
      log: options.log,
    });
  }

  start(): void {
    // A client that re-attached through another member moved the run's owner: follow it.
    this.unfollowOwners = this.scheduler.records.onChange((record, revision) => {
      const execution = this.executing.get(record.runId);
      if (execution && ours(execution, record)) {
        follow(execution, record);
        // The owner's side wrote (the token's hash, a moved owner): rebase on it now, not after a refused write and a read.
        if (revision > execution.revision) adopt(execution, record, revision);
      }
      this.localStarts.seen(record);
      // Check a queued run's workspace as soon as it is seen, not when a ticket is held.
      if (record.state === 'queued' && this.options.slots > 0 && this.options.gate.known(record.workspace) === undefined) void this.options.gate.serves(record.workspace);
    });
    // Back from an outage: heartbeat every ticket held here at once, not at its next tick.
    this.stopBeating = this.link.onChange((online) => {
      if (!online) return;
      for (const execution of this.executing.values()) if (!execution.lost) execution.lease.beat();
      this.localStarts.beat();
    });
    // Only a member that executes runs says it serves a workspace.
    if (this.options.slots > 0) this.stopAnswering = answerSurveys(this.link, this.names, this.options.gate, this.scheduler.worker);
    this.stopControl = this.answerControl();
    for (let i = 0; i < this.options.slots; i++) this.loops.push(this.loop());
  }

  /** Set when tracing is on (cli/daemon-command.ts): each execution here becomes a span continuing its start's trace. */
  observeExecution: ExecutionObserver | undefined;

  /**
   * Set by the cluster: hands a fresh start's child id to its front on this member, undefined when
   * none waits for it; else the front's write of that id (with the token's hash), which lands later.
   */
  startedHere: ((runId: string, childId: string, startedAt: string) => Promise<void> | undefined) | undefined;

  /** Set by the cluster: a local start (no record yet) whose child settled offers its outcome to its front's create; whether it is taken. */
  settledHere: ((runId: string, outcome: Partial<ClusterRun>) => boolean) | undefined;

  /** Set by the cluster: a local start (no record yet) whose child could not be made tells its front here. */
  failedHere: ((runId: string, error: SubagentError) => void) | undefined;

  /**
   * Control requests of other members' fronts, for every run executing here: one subscription on
   * this member's control subjects (names.ts), the run found by the subject's last token. A run
   * not executing here is answered `absent` at once, so its front need not wait for a timeout.
   */
  private answerControl(): () => void {
    const subjects = this.names.controlSubjects(this.scheduler.worker.id);
    const prefix = subjects.slice(0, -1);
    const subscription = this.link.nc.subscribe(subjects, {
      callback: (error, msg) => {
        if (error || !msg.reply) return;
        const execution = this.executing.get(msg.subject.slice(prefix.length));
        // One subscription serves every run here: nothing a request carries may throw out of it.
        const answered: Promise<ControlAnswer> = !execution
          ? Promise.resolve({ absent: true })
          : Promise.resolve()
              .then(() => this.control(execution, controlMessageOf(msg.json<unknown>())))
              .then(
              (): ControlAnswer => ({ ok: true }),
              (failure: unknown): ControlAnswer => ({
                error: {
                  code: failure instanceof SubagentError ? failure.code : 'RUN_STATE',
                  message: failure instanceof Error ? failure.message : String(failure),
                },
              }),
            );
        void answered.then((answer) => msg.respond(JSON.stringify(answer)));
      },
    });
    return () => subscription.unsubscribe();
  }

  /** A control message for a run executing here, handled at once (the front is this member); undefined when it is not here. */
  controlHere(runId: string, message: ControlMessage): Promise<void> | undefined {
    const execution = this.executing.get(runId);
    return execution ? this.control(execution, message) : undefined;
  }

  /**
   * Worktree starts (daemon/worktrees/): each real provider is wrapped by `isolate` as it is
   * picked, so a run asking for a worktree gets it here, from this member's checkout, recorded in
   * this member's state dir. Unset: the providers run as they are.
   */
  isolateWith(isolate: IsolateProvider): void {
    this.isolate = isolate;
  }

  private isolate: IsolateProvider | undefined;
  private readonly isolated = new WeakMap<DaemonProvider, DaemonProvider>();
  /** Runs whose dispose keeps the child for its front's next life: their worktree stays. */
  private readonly keeping = new Set<string>();

  /** The provider a run of `name` executes with: the real one, wrapped for worktree starts. */
  private executable(name: string): DaemonProvider | undefined {
    const real = this.providers.get(name);
    if (!real || !this.isolate) return real;
    let wrapped = this.isolated.get(real);
    if (!wrapped) {
      wrapped = this.isolate(real, { member: this.scheduler.worker.id, keeps: (runId) => this.keeping.has(runId) });
      this.isolated.set(real, wrapped);
    }
    return wrapped;
  }

  /** Runs executing here now (for status and tests). */
  get busy(): number {
    const { held, lent } = this.slotsHeld();
    return held + lent;
  }

  /** How this member's execution slots are held: runs on a ticket of their own (`held`, at most `slots`), nested runs on their parent's (`lent`). */
  slotsHeld(): { slots: number; held: number; lent: number } {
    let held = 0;
    let lent = 0;
    for (const execution of this.executing.values()) {
      if (execution.lost || execution.record.state !== 'running') continue;
      if (execution.record.lentBy === undefined) held += 1;
      else lent += 1;
    }
    return { slots: this.options.slots, held, lent };
  }

  /** The execution observer's start, contained: tracing never fails a run. */
  private observed(claim: Held): ((outcome: ExecutionOutcome) => void) | undefined {
    if (!this.observeExecution) return undefined;
    const { run } = claim;
    try {
      const end = this.observeExecution({
        runId: run.runId,
        provider: run.provider,
        ...(run.request.label !== undefined && { label: run.request.label }),
        ...(run.request.traceparent !== undefined && { traceparent: run.request.traceparent }),
        member: this.scheduler.worker.id,
        front: run.ownerMember,
        attempt: run.attempt,
        takeover: claim.takeover,
      });
      return (outcome) => {
        try {
          end(outcome);
        } catch (error) {
          this.options.log.warn({ err: error, runId: run.runId }, 'cluster: the execution observer failed');
        }
      };
    } catch (error) {
      this.options.log.warn({ err: error, runId: run.runId }, 'cluster: the execution observer failed');
      return undefined;
    }
  }

  /** Stops pulling and lets go of every run here; pulls still pending end when the link closes. */
  async close(): Promise<void> {
    this.stop.abort();
    this.stopAnswering?.();
    this.stopControl?.();
    this.stopBeating?.();
    this.unfollowOwners?.();
    for (const execution of this.executing.values()) this.letGo(execution, 'the member is stopping');
    this.freed();
    const spares = this.localStarts.close();
    await Promise.allSettled([...this.executing.values()].map((e) => e.run?.dispose()).concat(spares));
  }

  // A pin binds a queued continuation to the member holding its child; a pinned run taken
  // over (that member went silent) is claimed like any other, and ends saying it cannot migrate.
  private readonly mayRun = (run: ClusterRun): boolean =>
    this.providers.has(run.provider) && (run.state !== 'queued' || run.pin === undefined || run.pin === this.scheduler.worker.id);

  // A run executes only where its workspace is: the gate's verdict, made ready by `prepare`.
  private readonly canRun = (run: ClusterRun): boolean => this.mayRun(run) && this.options.gate.known(run.workspace) === true;

  private readonly prepare = async (runs: Iterable<ClusterRun>): Promise<void> => {
    const { gate } = this.options;
    const checks: Promise<boolean>[] = [];
    for (const run of runs) if (this.mayRun(run) && gate.known(run.workspace) === undefined) checks.push(gate.serves(run.workspace));
    await Promise.all(checks);
  };

  /** A loop's slot for its claim, reserved before the claim's compare-and-set (local starts take slots too). */
  private readonly slot: SlotReservation = {
    take: () => {
      if (!this.hasRoom()) return false;
      this.reserved += 1;
      return true;
    },
    give: () => {
      this.reserved -= 1;
      this.freed();
    },
  };

  /** A free execution slot: runs executing here under a ticket of their own, and slots promised, below `slots`. */
  private hasRoom(): boolean {
    return this.slotsHeld().held + this.reserved < this.options.slots;
  }

  /** A slot may have freed: waiting loops look again. */
  private freed(): void {
    for (const wake of this.roomWaiters.splice(0)) wake();
  }

  private async loop(): Promise<void> {
    while (!this.stop.signal.aborted) {
      if (!this.link.online) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      // This member's slots are full of local starts: wait for one to free before pulling a ticket.
      if (!this.hasRoom()) {
        await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
        continue;
      }
      const claim = await this.scheduler.next(this.stop.signal, this.canRun, this.prepare, this.slot).catch((error: unknown) => {
        this.options.log.warn({ err: error }, 'cluster: taking a run failed');
        return undefined;
      });
      if (!claim) continue;
      await this.performReserved(claim);
    }
  }

  /** Executes a claim on the slot reserved for it (a slot loop's, or a local start's). */
  private performReserved(claim: Held, cancel?: AbortSignal): Promise<void> {
    this.reserved -= 1; // the execution registers at once, and counts as held
    return this.perform(claim, cancel);
  }

  /** Executes a held claim, heard by the execution observer. */
  private async perform(claim: Held, cancel?: AbortSignal): Promise<void> {
    const executed = this.observed(claim);
    const outcome = await this.execute(claim, cancel).catch((error: unknown): ExecutionOutcome => {
      executed?.({ stopReason: 'error', errorCode: error instanceof SubagentError ? error.code : 'START_FAILED' });
      throw error;
    });
    executed?.(outcome);
  }

  /** The ticket of `parentRunId` when it executes here (its nested start may borrow its slot), else undefined. */
  lentTicket(parentRunId: string): number | undefined {
    const parent = this.executing.get(parentRunId);
    return parent && !parent.lost && parent.record.state === 'running' ? parent.lease.seq : undefined;
  }

  /**
   * A nested start on the slot its waiting parent lends it (lent-slots.ts): `record` is written
   * `running` here, then executed beside the slot loops; `cancel` is its start's signal. Resolves
   * once the record is written; RUN_STATE when the parent no longer executes here.
   */
  async executeLent(record: ClusterRun, cancel: AbortSignal): Promise<void> {
    const parentRunId = record.lentBy!;
    const gone = (): SubagentError => new SubagentError('RUN_STATE', `run ${parentRunId} no longer executes on member ${this.scheduler.worker.id}: its nested start cannot borrow its slot`);
    if (this.lentTicket(parentRunId) !== record.lease) throw gone();
    const { revision } = await this.scheduler.records.create(record);
    if (this.lentTicket(parentRunId) !== record.lease) {
      await this.scheduler.records.transition(record.runId, { ...record, state: 'settled', settledAt: isoTime(), result: { output: [], stopReason: 'aborted' }, startError: { code: 'RUN_STATE', message: gone().message } }, revision).catch(() => undefined);
      throw gone();
    }
    const claim: Held = { run: record, revision, lease: new NamedTicket(record.lease!, this.executing.get(parentRunId)!.lease.heartbeatMs), takeover: false };
    void this.perform(claim, cancel).catch((error: unknown) => this.options.log.warn({ err: error, runId: record.runId }, 'cluster: a nested run on a lent slot failed'));
  }

  /** Nested runs lent the slot of a run this member took over: their member went silent with it, and the parent redoes its step. */
  private endLeftLent(parentRunId: string, previous: string): void {
    for (const { record, revision } of leftLent(this.scheduler.records.all(), parentRunId, this.scheduler.worker.id)) {
      const diagnostic = `its parent ${parentRunId} was taken over from ${previous}, which went silent; the parent redoes the step that started it`;
      const ended: ClusterRun = { ...record, state: 'settled', settledAt: isoTime(), result: { output: [], stopReason: 'aborted', diagnostic } };
      void this.scheduler.records.transition(record.runId, ended, revision).catch(() => undefined); // written meanwhile: the record has the truth
    }
  }

  /** Runs one claimed run until it settles and its ticket is acknowledged; says how it ended here. */
  private async execute(claim: Held, cancel?: AbortSignal): Promise<ExecutionOutcome> {
    const { lease } = claim;
    const runId = claim.run.runId;
    // Made on first use (as run-hosting.ts's): most executions log nothing here, and a child logger per run showed in profiles.
    let made: Logger | undefined;
    const parent = this.options.log;
    const log = {
      get it(): Logger {
        return (made ??= parent.child({ runId, provider: claim.run.provider, attempt: claim.run.attempt }));
      },
    };
    let ended!: () => void;
    const execution: Execution = {
      runId,
      abort: new AbortController(),
      lease,
      lost: false,
      revision: claim.revision,
      record: claim.run,
      conduit: this.conduit(claim.run, log),
      ended: new Promise<void>((resolve) => (ended = resolve)),
    };
    this.executing.set(runId, execution);
    try {
      return await this.carryOut(execution, claim, log, cancel);
    } finally {
      ended();
    }
  }

  private async carryOut(execution: Execution, claim: Held, log: RunLog, cancel: AbortSignal | undefined): Promise<ExecutionOutcome> {
    const { lease } = claim;
    const { runId } = execution;
    // A lent slot's run stops with its start's cancel at once, even before its front can reach it.
    if (cancel) {
      if (cancel.aborted) execution.abort.abort(new SubagentError('ABORTED', 'cancelled by its owner'));
      else cancel.addEventListener('abort', () => execution.abort.abort(new SubagentError('ABORTED', 'cancelled by its owner')), { once: true });
    }
    lease.keepAlive(() => this.letGo(execution, 'its lease lapsed (no heartbeat reached NATS for ack_wait)'));
    const provider = this.executable(claim.run.provider);
    let mirror: SessionMirror | undefined;
    try {
      // Released by a reload between the pick and here.
      if (!provider) throw new SubagentError('NO_PROVIDER', `provider "${claim.run.provider}" was removed from member ${this.scheduler.worker.id} by a reload`);
      const record = claim.run;
      const signal = execution.abort.signal;
      let begun: Begun;
      if (claim.takeover && record.childId !== undefined) {
        this.endLeftLent(runId, claim.previous?.id ?? 'its member');
        const restored = await this.childRestore.takeOver(claim, record.childId, provider, execution.conduit, signal);
        begun = { ...restored, conduit: execution.conduit, from: 'mirror' };
        log.it.info({ child: record.childId }, 'cluster: took over a run from a silent member');
      } else if (record.resumes) {
        begun = await this.continueChild(record, provider, execution.conduit, signal);
        log.it.info({ child: record.resumes.childId, previousRun: record.resumes.runId, from: begun.from }, 'cluster: continuing a child');
      } else {
        const { conduit } = execution;
        // A start nobody can see any more (its front died before answering) is not run: its
        // client never got a run id, and comes back, if at all, with its idempotency key. It is
        // parked (back to queued, claimed by nobody) and its ticket acknowledged: the slot is free.
        if (!(await this.relay.awaited(conduit.target))) {
          const parked = await this.scheduler.records.transition(runId, parkedRecord(record), execution.revision).then(() => true, () => false);
          if (!parked) throw new SubagentError('ABORTED', `the start's front member ${record.ownerMember} is gone: nobody waits for this start, so it was not run`);
          log.it.info({ front: record.ownerMember }, 'cluster: parked a start whose front is gone, until a retry under its key adopts it');
          await lease.ack().catch(() => lease.stop());
          this.forget(execution);
          return { stopReason: 'parked' };
        }
        const run = await provider.start({ ...record.request, signal, host: conduit.host, ...(conduit.report && { report: conduit.report }) });
        begun = { run, stored: 0, conduit };
      }
      execution.run = begun.run;
      execution.conduit = begun.conduit;
      this.interruptPending(execution);
      mirror = begun.conduit.mirror = new SessionMirror(this.sessions, sessionKeyOf(record), begun.run.localAgent, begun.stored);
      if (!claim.takeover || record.childId === undefined) {
        await mirror.sync();
        const started = { childId: begun.run.id, startedAt: isoTime() };
        // The run's front is this member and waits for this child: it writes the id with the
        // token's hash (and our next write rebases on it). Otherwise the record tells the front.
        const toldHere = !claim.takeover && record.resumes === undefined && record.ownerMember === this.scheduler.worker.id && this.startedHere?.(runId, started.childId, started.startedAt);
        if (toldHere) {
          execution.record = { ...execution.record, ...started };
          execution.frontWrite = toldHere;
        } else if (unrecorded(execution)) throw new SubagentError('ABORTED', 'start was cancelled before the child was ready'); // a local start nobody waits for
        else await this.record(execution, started);
      }
    } catch (error) {
      mirror?.stop();
      if (unrecorded(execution)) {
        // A local start: no record to carry the error, and no ticket to acknowledge (it goes on).
        const failure = error instanceof SubagentError ? error : new SubagentError('START_FAILED', error instanceof Error ? error.message : String(error));
        this.failedHere?.(runId, failure);
        await execution.run?.dispose().catch(() => undefined);
        if (!execution.lost) this.passOn(execution);
        this.forget(execution);
        return { stopReason: 'error', errorCode: failure.code };
      }
      if (!execution.lost) {
        const code = error instanceof SubagentError ? error.code : 'START_FAILED';
        const message = error instanceof Error ? error.message : String(error);
        await this.record(execution, {
          state: 'settled',
          settledAt: isoTime(),
          result: { output: [], stopReason: 'error', diagnostic: message },
          ...(!claim.takeover && { startError: { code, message } }),
        }).catch((e: unknown) => log.it.warn({ err: e }, 'cluster: recording a failed start failed'));
        await lease.ack().catch(() => lease.stop());
      }
      this.forget(execution);
      return { stopReason: 'error', errorCode: error instanceof SubagentError ? error.code : 'START_FAILED' };
    }
    const result = await execution.run.result.catch(
      (error: unknown): SubagentResult => ({ output: [], stopReason: 'error', diagnostic: error instanceof Error ? error.message : String(error) }),
    );
    // A child that settles while NATS is away keeps its outcome here until the server is back
    // (within the lease): the whole session first, then the record, then the ticket.
    const settledAt = isoTime();
    await this.untilStored(execution, log, 'mirroring the session', () => mirror.sync());
    mirror.stop();
    await this.untilStored(execution, log, 'recording the outcome', () => this.record(execution, { state: 'settled', settledAt, result }));
    this.freed();
    if (execution.lost) return { stopReason: result.stopReason };
    if (lease instanceof Lease && !this.stop.signal.aborted) this.passOn(execution);
    else await this.untilStored(execution, log, 'acknowledging the ticket', () => lease.ack());
    return { stopReason: result.stopReason };
  }

  /** The run's ticket goes on (local-starts.ts): this execution keeps only its sequence. */
  private passOn(execution: Execution): void {
    const { lease } = execution;
    if (!(lease instanceof Lease)) return;
    execution.lease = new NamedTicket(lease.seq, lease.heartbeatMs);
    this.localStarts.recycle(lease);
  }

  /**
   * Retries `store` while the run is ours: a write refused for being stale ends it (the run was
   * taken over), any other failure (NATS away) is tried again once the link is back.
   */
  private async untilStored(execution: Execution, log: RunLog, what: string, store: () => Promise<unknown>): Promise<void> {
    for (let attempt = 1; !execution.lost; attempt++) {
      try {
        await store();
        return;
      } catch (error) {
        if (error instanceof SubagentError && error.code === 'REVISION_CONFLICT') return;
        if (attempt === 1) log.it.warn({ err: error }, `cluster: ${what} failed; retrying while the run is ours`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  /** A fresh line to the run's owner member (its events cue the session mirror). */
  private conduit(record: ClusterRun, log: RunLog): Conduit {
    const target: RelayTarget = { runId: record.runId, ownerMember: record.ownerMember };
    const base = {
      get log(): Logger {
        return log.it;
      },
      ...(this.options.maxOutputBytes !== undefined && { maxOutputBytes: this.options.maxOutputBytes }),
    };
    const conduit: Conduit = {
      target,
      host: this.relay.remoteHost(target, base, () => conduit.mirror?.schedule()),
      report: record.reports ? this.relay.remoteReport(target) : undefined,
    };
    return conduit;
  }

  /**
   * A continuation: the child itself when its previous run executed here and is still held
   * (its line now speaks for this run), else the child restored from the mirror (child-restore.ts).
   */
  private async continueChild(record: ClusterRun, provider: DaemonProvider, fresh: Conduit, signal: AbortSignal): Promise<Begun> {
    const previousRunId = record.resumes!.runId;
    await assertClaimed(this.scheduler.records, record);
    const previous = this.executing.get(previousRunId);
    if (previous?.run?.resume && !previous.lost) {
      // The line speaks for the new run from the resume on: what the child (and the worktree
      // wrapper, which names the turn's run) does in it is this run's.
      const conduit = previous.conduit;
      const before = { runId: conduit.target.runId, ownerMember: conduit.target.ownerMember };
      conduit.target.runId = record.runId;
      conduit.target.ownerMember = record.ownerMember;
      try {
        const run = await previous.run.resume(record.request.prompt, { signal });
        return { run, stored: conduit.mirror?.published ?? 0, conduit, from: 'held' };
      } catch (error) {
        Object.assign(conduit.target, before);
        throw error;
      }
    }
    const previousResult = this.scheduler.records.seen(previousRunId)?.record.result;
    const restored = await this.childRestore.continuation(record, provider, fresh, signal, previousResult);
    return { ...restored, conduit: fresh, from: 'mirror' };
  }

  private async control(execution: Execution, message: ControlMessage): Promise<void> {
    if (message.op === 'send') {
      if (execution.lost || !execution.run) throw new SubagentError('RUN_STATE', `run ${execution.runId} has no running child on this member`);
      if (!execution.run.sendMessage) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${execution.record.provider}" does not support sendMessage`);
      await execution.run.sendMessage(message.content);
    } else if (message.op === 'hold') {
      if (execution.lost || !execution.run?.resume) throw new SubagentError('RUN_STATE', `run ${execution.runId}'s child is no longer held on this member`);
    } else if (message.op === 'cancel') execution.abort.abort(new SubagentError('ABORTED', 'cancelled by its owner'));
    else if (message.op === 'interrupt') this.interrupt(execution, message.level);
    else {
      // A run whose outcome is recorded has nothing left to stop (and no error to build for it).
      if (execution.record.state !== 'settled') execution.abort.abort(new SubagentError('ABORTED', 'disposed by its owner'));
      if (message.keep === true) this.keeping.add(execution.runId);
      await execution.run?.dispose().catch(() => undefined);
      this.keeping.delete(execution.runId);
      if (!execution.lost && message.keep !== true) {
        // Told, not stored (run-records.ts): after the outcome, which the record keeps.
        await execution.ended;
        if (!execution.lost && execution.record.worker?.id === this.scheduler.worker.id) this.scheduler.records.tell(execution.runId, { state: 'disposed' });
      }
      this.forget(execution);
    }
  }

  /**
   * An `after-step` reaches the nested runs this run lent its slot to, as on one daemon
   * (run-table.ts): their stand-ins are this member's, not the front's, so the front's cascade
   * cannot see them. A run whose child does not exist yet gets the level once it does.
   */
  private interrupt(execution: Execution, level: InterruptLevel): void {
    if (level === 'after-step') {
      if (execution.stopsAfterStep) return;
      execution.stopsAfterStep = true;
      if (!execution.run) return;
    }
    // Called on the run (its method reads its own state); without one every interrupt is `now`.
    if (execution.run?.interrupt) execution.run.interrupt(level);
    else execution.abort.abort(new SubagentError('ABORTED', 'interrupted by its owner'));
    if (level !== 'after-step') return;
    for (const nested of this.executing.values()) if (nested.record.lentBy === execution.runId) this.interrupt(nested, level);
  }

  /** A child now exists for `execution`: an `after-step` told to it or its parent before applies. */
  private interruptPending(execution: Execution): void {
    const parent = execution.record.lentBy !== undefined ? this.executing.get(execution.record.lentBy) : undefined;
    if (!execution.stopsAfterStep && !parent?.stopsAfterStep) return;
    execution.stopsAfterStep = false;
    this.interrupt(execution, 'after-step');
  }

  /**
   * Compare-and-set from the revision this member holds. On a conflict the record is read again:
   * if it still names this member at this attempt under this lease, only the owner's side wrote
   * (the token's hash, a moved owner) and the write is made again on top of it; otherwise the run
   * is no longer ours.
   */
  private async record(execution: Execution, patch: Partial<ClusterRun>): Promise<void> {
    if (execution.frontWrite) {
      // An outcome before the local start's record has left: that create carries it (answer-writes.ts),
      // and the view hands us the record settled (ours: the state is the one expected here).
      const carried = unrecorded(execution) && patch.state === 'settled' && this.settledHere?.(execution.runId, patch) === true;
      if (carried) execution.record = { ...execution.record, ...patch };
      // The front's write lands first (the view hands us its revision), so ours is not refused. A
      // local start's record is that write: waited for whole (it ends with the answer, or the
      // start's abandon).
      await (unrecorded(execution) ? execution.frontWrite : settledOrAfter(execution.frontWrite, execution.lease.heartbeatMs));
      execution.frontWrite = undefined;
      if (carried && !unrecorded(execution)) return;
    }
    // A local start whose front never recorded it (its answer failed, or never came): nothing to write.
    if (unrecorded(execution)) throw new SubagentError('REVISION_CONFLICT', `run ${execution.runId} has no record: its start was not answered`);
    for (;;) {
      const next: ClusterRun = { ...execution.record, ...patch };
      try {
        execution.revision = await this.scheduler.records.transition(execution.runId, next, execution.revision);
        execution.record = next;
        return;
      } catch (error) {
        if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) throw error;
        const current = await this.scheduler.records.get(execution.runId);
        if (!current || !ours(execution, current.record)) {
          this.letGo(execution, 'another member took the run over');
          throw error;
        }
        adopt(execution, current.record, current.revision);
        follow(execution, current.record);
      }
    }
  }

  /** The run is not ours any more: stop the child, write nothing, keep the ticket unacknowledged. */
  private letGo(execution: Execution, why: string): void {
    if (execution.lost) return;
    execution.lost = true;
    execution.lease.stop();
    this.options.log.warn({ runId: execution.runId }, `cluster: letting go of a run: ${why}`);
    execution.abort.abort(new SubagentError('ABORTED', `this member let go of the run: ${why}`));
    // Its nested runs hold its slot: they go with it.
    for (const other of this.executing.values()) if (other.record.lentBy === execution.runId) this.letGo(other, `its parent ${execution.runId} was let go`);
  }

  private forget(execution: Execution): void {
    this.executing.delete(execution.runId);
    this.freed();
  }
}

const CONTROL_OPS: ReadonlySet<string> = new Set(['cancel', 'dispose', 'interrupt', 'send', 'hold']);

/** A control request's message, checked for its op: an unknown one must not fall through to any action. */
function controlMessageOf(value: unknown): ControlMessage {
  const op = (value as { op?: unknown } | null)?.op;
  if (typeof op !== 'string' || !CONTROL_OPS.has(op)) throw new SubagentError('INVALID_REQUEST', `not a control message: op ${JSON.stringify(op)}`);
  return value as ControlMessage;
}

/** A local start not recorded yet (local-starts.ts): the front creates its record when it answers. */
const unrecorded = (execution: Execution): boolean => execution.revision === 0;

/** The record still names this execution: same worker, attempt and lease, and not ended by another. */
function ours(execution: Execution, record: ClusterRun): boolean {
  const mine = execution.record;
  return (
    record.worker?.id === mine.worker?.id &&
    record.attempt === mine.attempt &&
    record.lease === mine.lease &&
    (record.state === 'running' || record.state === mine.state)
  );
}

/** The record as the owner's side left it, still this execution's: the next write here starts from it. */
function adopt(execution: Execution, record: ClusterRun, revision: number): void {
  execution.record = record;
  execution.revision = revision;
}

/** The child's messages follow its run's owner, while the child speaks for this run (not a later one of its chain). */
function follow(execution: Execution, record: ClusterRun): void {
  const { target } = execution.conduit;
  if (target.runId === execution.runId) target.ownerMember = record.ownerMember;
}
