/**
 * The record of one run of the cluster, as stored in the KV bucket (run-records.ts). Its state
 * moves queued → running → settled, each step a compare-and-set; a takeover after a member's
 * death is running → running with a new worker, a new attempt and the same lease. `disposed` is
 * told to the members' views, not stored (the executing member released the child; the stored
 * record stays settled), except when the executing member did not answer the dispose: then the
 * front stores it (cluster-provider.ts).
 * Besides the executing member, the owner's side writes two things by compare-and-set: the
 * token's hash once the run is published, and `ownerMember` when its client re-attaches
 * elsewhere. Neither changes who executes the run (cluster-worker.ts rebases onto them).
 * A resumption of a settled child is a run of its own (a new run id, queued like a start) that
 * names the run it continues and the session it appends to.
 */
import { SubagentError, type SubagentErrorCode, type SubagentResult, type WorkerRef } from '../../protocol/index.js';
import type { ProviderStartRequest } from '../provider.js';
import type { WorkspaceIdentity } from './workspace.js';

/** A start request as it travels: everything but what lives only in the submitting process. */
export type QueuedStart = Omit<ProviderStartRequest, 'signal' | 'host' | 'report'>;

/** The member executing a run: `pid` is that daemon's own process. */
export type { WorkerRef };

export type ClusterRunState = 'queued' | 'running' | 'settled' | 'disposed';

export interface ClusterRun {
  readonly runId: string;
  /** Whom fairness is counted for: the submitting client (its owner key's hash, or its connection). */
  readonly owner: string;
  /**
   * The member whose client owns the run: its events and tool calls go there. The submitting
   * member first; a client that re-attaches through another member moves it there (by
   * compare-and-set), and the executing member follows the move.
   */
  readonly ownerMember: string;
  readonly provider: string;
  readonly state: ClusterRunState;
  readonly queuedAt: string;
  /** The start request as submitted, for whichever member executes it. */
  readonly request: QueuedStart;
  /** 0 while queued, 1 for the first execution, one more per takeover. */
  readonly attempt: number;
  readonly worker?: WorkerRef;
  /** The ticket (its queue sequence) the run executes under; a redelivered ticket finds its run by it. */
  readonly lease?: number;
  readonly claimedAt?: string;
  /**
   * A local start: its front executed it at once on a spare ticket it held (spare-tickets.ts),
   * created `running` (or settled: answer-writes.ts), never queued; `lease` is that ticket's sequence.
   */
  readonly local?: true;
  /** The child exists (published); its id names its session. */
  readonly childId?: string;
  readonly startedAt?: string;
  readonly settledAt?: string;
  readonly result?: SubagentResult;
  /** Set when the start failed (the child never existed): the submitter's start rejects with it. */
  readonly startError?: { readonly code: SubagentErrorCode; readonly message: string };
  /**
   * The sha256 of the owner's run token, written by the submitting member once the run is
   * published: any member checks a re-attach against it. Until then no member lists the run.
   */
  readonly tokenHash?: string;
  /** The member the run was started through, written with `tokenHash`: its own run index also holds the run. */
  readonly front?: string;
  /** Nested delegation: the run whose child started this one. */
  readonly parentRunId?: string;
  /**
   * A nested start executing on the slot its waiting parent lent it (lent-slots.ts): the parent's
   * run id. Written `running` on the parent's member under the parent's ticket; never queued.
   */
  readonly lentBy?: string;
  /** A resumption: the settled run whose child it continues (`request.prompt` is the new message). */
  readonly resumes?: { readonly runId: string; readonly childId: string };
  /** The run whose session subject holds the child's session (a chain's first run); absent: this run's own. */
  readonly session?: string;
  /** The start had a `report` sink (a continuable child): the child's reports are relayed to the front. */
  readonly reports?: boolean;
  /**
   * On a chain's first run only: the continuation that holds its child now (child-fence.ts),
   * claimed by compare-and-set before it was queued; `at` is when.
   */
  readonly continuedBy?: { readonly runId: string; readonly at: string };
  /**
   * Where the run must execute: the parent's cwd as the front saw it (git top-level, HEAD, origin).
   * Only a member whose own view of that cwd matches claims it (workspace.ts); a continuation
   * carries its chain's first identity. Absent on records written before workspaces were checked.
   */
  readonly workspace?: WorkspaceIdentity;
  /** Only this member may take the run: it holds the child's agent process (a child that cannot be restored elsewhere). */
  readonly pin?: string;
  /**
   * A queued start whose front died before answering (parked-starts.ts): no member claims it
   * until a retry under its idempotency key adopts it through some member; `parked` is when it
   * was parked, and it is dropped once the keys' window has passed.
   */
  readonly parked?: string;
  /**
   * Set by its front while no live member says it serves the run's workspace
   * (workspace-survey.ts): the run waits for such a member, not for the cap, so local starts and
   * spares do not yield to it (scheduler.ts `hasQueued`). Cleared when a member says yes.
   */
  readonly unserved?: string;
}

/** Where a run's child's session is mirrored: one subject per child, named by its chain's first run. */
export function sessionKeyOf(run: Pick<ClusterRun, 'runId' | 'session'>): string {
  return run.session ?? run.runId;
}

/** The run's client re-attached it through another member while it runs: this member no longer holds it. */
export function ownerMovedFrom(record: ClusterRun, memberId: string): boolean {
  return record.tokenHash !== undefined && record.ownerMember !== memberId && record.state === 'running';
}

/** What waiters on the member a run's client left get: the run goes on, held by the member it moved to. */
export function movedAway(record: ClusterRun): SubagentError {
  return new SubagentError(
    'HANDED_OVER',
    `run ${record.runId} was re-attached through cluster member ${record.ownerMember}, which holds it now: wait on it there (or run/attach it here again)`,
  );
}
