/**
 * One continuation at a time per child, across the whole pool. A child that can be restored from
 * its mirrored session may be continued through any member, so the member holding the chain
 * cannot be the only judge: before a continuation is queued, its front claims the child by
 * compare-and-set on the record of the chain's first run (the one whose session subject holds
 * the child's session), writing `continuedBy`. Every continuation of the child, whichever run of
 * the chain it resumes and whichever member it comes through, writes that same key, so of two
 * fronts racing exactly one wins the revision.
 *
 * Rules and failures:
 * - The claim is free when `continuedBy` is empty, names a run that settled (or was disposed),
 *   or names a run with no record that was claimed more than STALE_CLAIM_MS ago (its front died
 *   between its claim and queueing it). Otherwise the claim is RUN_STATE naming the run that
 *   continues the child; a claim the records cannot be read or written for is CLUSTER_UNAVAILABLE.
 * - A continuation that never got queued releases its claim (only if it still holds it).
 * - The executing member checks the claim before it brings the child back (`assertClaimed`):
 *   a continuation the key does not name is refused with RUN_STATE, and never runs.
 */
import { isoTime } from '../../common/iso-time.js';
import { SubagentError } from '../../protocol/index.js';
import { sessionKeyOf, type ClusterRun } from './cluster-run.js';
import type { RunRecords } from './run-records.js';

/** A claim older than this whose run has no record was left by a front that died before queueing it. */
export const STALE_CLAIM_MS = 30_000;

type Records = RunRecords<ClusterRun>;

/**
 * Claims `childId` for the continuation `nextRunId` of `previous`'s chain; resolves with a
 * function that releases the claim (for a continuation that could not be queued).
 */
export async function claimChild(records: Records, previous: ClusterRun, childId: string, nextRunId: string): Promise<() => Promise<void>> {
  try {
    return await claim(records, sessionKeyOf(previous), childId, nextRunId);
  } catch (error) {
    if (error instanceof SubagentError) throw error;
    throw new SubagentError('CLUSTER_UNAVAILABLE', `child ${childId} could not be claimed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function claim(records: Records, headId: string, childId: string, nextRunId: string): Promise<() => Promise<void>> {
  for (;;) {
    const head = await records.get(headId);
    if (!head) throw new SubagentError('RUN_STATE', `child ${childId}: the cluster has no record of run ${headId}, the first of its chain`);
    const holder = head.record.continuedBy;
    if (holder && !(await claimIsOver(records, holder))) {
      throw new SubagentError('RUN_STATE', `child ${childId} is already being continued by run ${holder.runId}; resume it once that run settles`);
    }
    const claimed: ClusterRun = { ...head.record, continuedBy: { runId: nextRunId, at: isoTime() } };
    try {
      await records.transition(headId, claimed, head.revision);
      return () => release(records, headId, nextRunId);
    } catch (error) {
      if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) throw error;
      // Written meanwhile (another front's claim, or the head's own member): judge again.
    }
  }
}

/** On the executing member: the continuation `record` holds its child's claim, or it must not run. */
export async function assertClaimed(records: Records, record: ClusterRun): Promise<void> {
  const head = await records.get(sessionKeyOf(record));
  const holder = head?.record.continuedBy?.runId;
  if (holder !== record.runId) {
    const childId = record.resumes?.childId;
    throw new SubagentError('RUN_STATE', `child ${childId} is being continued by run ${holder ?? '(none)'}, not by run ${record.runId}`);
  }
}

async function claimIsOver(records: Records, holder: NonNullable<ClusterRun['continuedBy']>): Promise<boolean> {
  const run = await records.get(holder.runId);
  if (!run) return Date.now() - Date.parse(holder.at) > STALE_CLAIM_MS;
  return run.record.state === 'settled' || run.record.state === 'disposed';
}

async function release(records: Records, headId: string, runId: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const head = await records.get(headId).catch(() => undefined);
    if (head?.record.continuedBy?.runId !== runId) return;
    const { continuedBy: _released, ...rest } = head.record;
    const done = await records.transition(headId, rest, head.revision).then(() => true, () => false);
    if (done) return;
  }
}
