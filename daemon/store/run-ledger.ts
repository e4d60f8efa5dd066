/**
 * The RunLedger: where the service keeps what outlives one process. Runs are recorded,
 * admitted and found again through it, so the service never knows whether it runs on one
 * daemon's files (local-ledger.ts) or on a cluster's shared store (daemon/cluster/).
 *
 * Rules every implementation keeps:
 * - Everything that may cross machines returns a Promise. An implementation that answers from
 *   memory resolves at once; the service awaits only where an answer must be in before it goes
 *   on (a run's first record before its token is handed out).
 * - A record carries a `revision`. `create` fails with REVISION_CONFLICT when the run id is
 *   taken; `transition` is a compare-and-set on the revision the caller last saw, and a stale
 *   one fails with REVISION_CONFLICT (another writer moved the run: re-read, decide again).
 * - A record names its `worker`: the member executing it. `leftBehind` lists the records a
 *   member that is gone left unfinished, for the service's recovery to settle or continue.
 * - `admit` grants a slot of the shared concurrency budget, fairly across owners; the lease's
 *   `release` frees it exactly once (an implementation with leases keeps them alive until then).
 * - Run events and lifecycle notices reach an owner through its RunOwner, by a direct call; a
 *   run executing on another member relays its events to the member holding it (the run
 *   `adopt` hands over, or a cluster provider's stand-in). Session events are the providers' (store/session-log.ts).
 * - A write that cannot be made durable never throws at the caller of a settled run's
 *   transition; `assertRecordable` refuses new runs while runs cannot be recorded.
 */
import type { RunInfo, RunState, RunsListParams, RunsListResult, SubagentResult, ToolFilter, WorkerRef } from '../../protocol/index.js';
import type { DaemonRun, RunHost } from '../provider.js';

/** The member executing a run: `id` is its epoch (unique per daemon process), `pid` that daemon's own. */
export type { WorkerRef };

/** `checkpointed`: stopped at a drain's timeout, to be continued by the next daemon. */
export type StoredState = RunState | 'checkpointed';

/** What a later daemon needs to restore a child faithfully (see providers' `restore`). */
export interface RestoreHints {
  readonly persona?: string;
  readonly toolFilter?: ToolFilter;
  readonly maxDepth?: number;
}

/** One run's durable record. */
export interface StoredRun {
  readonly runId: string;
  /** The child's id: its session's name. */
  readonly id: string;
  readonly provider: string;
  /** sha256 of the owner's run token: proves ownership across connections and restarts. */
  readonly tokenHash: string;
  readonly state: StoredState;
  readonly startedAt: string;
  readonly settledAt?: string;
  readonly result?: SubagentResult;
  readonly worker: WorkerRef;
  /** Compare-and-set fence: every transition names the revision it read. */
  readonly revision: number;
  /** The run whose child started this one (nested delegation). */
  readonly parentRunId?: string;
  /** Earlier run of the same child, for resumptions. */
  readonly resumedFrom?: string;
  readonly restore?: RestoreHints;
}

/** A record as the service hands it over: the ledger stamps the revision. */
export type NewRun = Omit<StoredRun, 'revision'>;

/** What a transition may change. */
export type RunPatch = Partial<Pick<StoredRun, 'state' | 'settledAt' | 'result' | 'worker'>>;

/** A run as a listing sees it (the service overlays what it holds live on the stored record). */
export interface ListedRun {
  readonly runId: string;
  readonly state: RunState;
  readonly provider: string;
  readonly startedAt: string;
  readonly mine: boolean;
  /** Built only for runs on the page. */
  info(): RunInfo;
}

/** A granted slot of the shared budget. */
export interface Lease {
  /** Gives the slot back; later calls do nothing. */
  release(): void;
}

export interface AdmissionLimits {
  /** Live runs across all owners. */
  readonly maxConcurrentRuns: number;
  /** Live runs of one owner. */
  readonly maxRunsPerConnection: number;
  /** Starts that may wait for a slot, across all owners. */
  readonly maxQueued: number;
}

export interface AdmissionStats {
  readonly running: number;
  readonly queued: number;
  readonly byConnection: Record<string, { running: number; queued: number }>;
  /** A cluster member: how its execution slots are held (daemon/cluster/lent-slots.ts). */
  readonly execution?: ExecutionSlots;
}

/** A cluster member's execution slots: `slots` (cluster.slots), runs on a ticket of their own (`held`), nested runs on their parent's (`lent`). */
export interface ExecutionSlots {
  readonly slots: number;
  readonly held: number;
  readonly lent: number;
}

export interface RunLedger {
  /** This member, as its records name it. */
  readonly worker: WorkerRef;
  readonly limits: AdmissionLimits;

  /** START_FAILED, saying why, while a new run could not be recorded (it would be lost at a restart). */
  assertRecordable(): void;
  /** Records a new run at revision 1 (or the backend's first); REVISION_CONFLICT if the id exists. */
  create(run: NewRun): Promise<StoredRun>;
  get(runId: string): Promise<StoredRun | undefined>;
  /** Compare-and-set: applies `patch` if the record is still at `expectedRevision`, else REVISION_CONFLICT. */
  transition(runId: string, patch: RunPatch, expectedRevision: number): Promise<StoredRun>;
  /** `runs/list`: newest first, `see` turning each stored record into what the asker sees. */
  page(params: RunsListParams, see: (stored: StoredRun) => ListedRun): Promise<RunsListResult>;
  /** Unfinished records (running, starting, checkpointed) whose worker is gone: recovery's input. */
  leftBehind(): Promise<StoredRun[]>;
  /**
   * Optional, for a ledger shared by several members: takes over, for this member, a run that
   * executes on another one, on behalf of a client that proved it owns the run (its token). The
   * record's owner moves here by compare-and-set; the returned run relays the child's events and
   * calls to `host`, carries cancel (`signal`), interrupt and dispose to the executing member, and
   * settles with the outcome its record gets, wherever the run ends up executing, or rejects
   * with HANDED_OVER once its client takes it to yet another member. Resolves
   * undefined when the run executes nowhere now (it ended: read its record again). A ledger of
   * one daemon has no other members and leaves this out.
   */
  adopt?(runId: string, host: RunHost, signal: AbortSignal): Promise<{ readonly run: DaemonRun; readonly stored: StoredRun } | undefined>;

  /**
   * Waits for a slot for `owner` (fair across owners); OVERLOADED past the queue bound, ABORTED on
   * `signal`. `onPosition`, when given, hears the start's place in line (1 = next) while it waits,
   * on entry and as it changes; a backend that cannot count places never calls it.
   */
  admit(owner: string, provider: string, signal: AbortSignal, onPosition?: (position: number) => void): Promise<Lease>;
  admission(): AdmissionStats;

  /**
   * A cluster member: whether it executes `runId` for another member's client. A nested start of
   * such a run is made here, on the slot it lends (daemon/cluster/lent-slots.ts). Absent: never.
   */
  executesHere?(runId: string): boolean;

  /** Writes what is pending and lets go of the store. */
  close(): Promise<void>;
}
