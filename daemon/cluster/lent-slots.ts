/**
 * Nested starts in a pool: the cluster's half of the lineage rule (the admission half is
 * daemon/service/lineage-slots.ts). A child delegating with the `subagent` tool waits on its
 * nested child in the foreground, so it lends that child its *execution* slot as well: the
 * child runs on the member executing the parent, under the parent's ticket, and is never
 * queued. So a nested start waits neither for the cluster-wide cap (the queue's tickets) nor for
 * a member's `cluster.slots`; a lineage holds its root's one ticket however deep it goes; and for
 * any cap ≥ 1 and any slots ≥ 1 every lineage completes.
 *
 * - Workspace affinity holds: the nested child's cwd is its parent's, which the parent's member
 *   serves (it claimed the parent for it).
 * - One child at a time per parent: the service borrows the parent's admission slot first
 *   (lineage-slots.ts), on this same member, before the stand-in lends the execution slot.
 * - The child's record is written `running` at once, with this member as `worker` and the
 *   parent's ticket as `lease`, and `lentBy` naming the parent: no member claims it, and a
 *   redelivered ticket is the parent's, never the child's (scheduler.ts).
 * - The ticket stays the parent's: the child's end acknowledges nothing. When the parent's lease
 *   lapses (or this member lets go of the parent) its lent children are let go with it; a
 *   member that takes the parent over ends their records (the parent redoes its step, and with
 *   it the nested start).
 */
import { isoTime } from '../../common/iso-time.js';
import type { ClusterRun, WorkerRef } from './cluster-run.js';

/** The record of a nested start lent the slot of `parentRunId`, whose ticket is `seq`, on `worker`. */
export function lentRecord(record: ClusterRun, parentRunId: string, seq: number, worker: WorkerRef): ClusterRun {
  return { ...record, state: 'running', worker, lease: seq, attempt: 1, claimedAt: isoTime(), lentBy: parentRunId };
}

/** The records of runs lent `parentRunId`'s slot on a member other than `me`: left behind by a member that went silent. */
export function* leftLent(records: Iterable<{ record: ClusterRun; revision: number }>, parentRunId: string, me: string): Generator<{ record: ClusterRun; revision: number }> {
  for (const entry of records) {
    const { record } = entry;
    if (record.lentBy === parentRunId && record.state === 'running' && record.worker?.id !== me) yield entry;
  }
}
