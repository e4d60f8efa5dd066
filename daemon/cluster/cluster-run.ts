/**
 * The record of one run of the cluster, as stored in the KV bucket (run-records.ts). Its state
 * moves queued → running → settled → disposed, each step a compare-and-set; a takeover after a
 * member's death is running → running with a new worker, a new attempt and the same lease.
 */
import type { SubagentErrorCode, SubagentResult, WorkerRef } from '../../protocol/index.js';
import type { ProviderStartRequest } from '../provider.js';

/** A start request as it travels: everything but what lives only in the submitting process. */
export type QueuedStart = Omit<ProviderStartRequest, 'signal' | 'host' | 'report'>;

/** The member executing a run: `pid` is that daemon's own process. */
export type { WorkerRef };

export type ClusterRunState = 'queued' | 'running' | 'settled' | 'disposed';

export interface ClusterRun {
  readonly runId: string;
  /** Whom fairness is counted for: the submitting client (its owner key's hash, or its connection). */
  readonly owner: string;
  /** The member whose client submitted the run: its notifications go there. */
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
  /** The child exists (published); its id names its session. */
  readonly childId?: string;
  readonly startedAt?: string;
  readonly settledAt?: string;
  readonly result?: SubagentResult;
  /** Set when the start failed (the child never existed): the submitter's start rejects with it. */
  readonly startError?: { readonly code: SubagentErrorCode; readonly message: string };
}
