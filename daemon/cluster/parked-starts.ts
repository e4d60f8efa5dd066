/**
 * Parked starts: a queued start whose front member died before answering. Its client never got
 * a run id, so running it would be a task nobody sees (and its retry would run it again); dropping
 * it would make the retry a fresh run. So it waits, unstarted, for its client:
 *
 * - The member that claims it and finds its front gone (cluster-worker.ts) puts it back to
 *   `queued` with `parked` set and acknowledges its ticket: no member claims it (scheduler.ts).
 * - A retry under its idempotency key, through any member, adopts it (pool-start-keys.ts): that
 *   member becomes its front and puts it back in the queue with a ticket of its own, so the task
 *   runs once, under its first run id.
 * - Nobody came back within the keys' window: it is dropped (settled, unstarted, with a start
 *   error saying so), by whichever member's sweep gets there first (compare-and-set).
 */
import type { Logger } from 'pino';
import { isoTime } from '../../common/iso-time.js';
import type { ClusterRun } from './cluster-run.js';
import type { RunRecords } from './run-records.js';

/** The claimed `record` of a start nobody waits for, parked: queued again, claimed by nobody. */
export function parkedRecord(record: ClusterRun): ClusterRun {
  const { worker: _worker, lease: _lease, claimedAt: _claimedAt, local: _local, ...rest } = record;
  return { ...rest, state: 'queued', attempt: 0, parked: isoTime() };
}

/** The parked `record` adopted through member `memberId` (its new front): queued for any member again. */
export function adoptedRecord(record: ClusterRun, memberId: string): ClusterRun {
  const { parked: _parked, ...rest } = record;
  return { ...rest, ownerMember: memberId, queuedAt: isoTime() };
}

/** Drops the parked starts older than `windowMs` every `everyMs`; returns the stop. */
export function sweepParked(records: RunRecords<ClusterRun>, windowMs: number, log: Logger, everyMs = Math.min(60_000, windowMs)): () => void {
  const timer = setInterval(() => {
    const before = isoTime(Date.now() - windowMs);
    for (const { record, revision } of records.all()) {
      if (record.state !== 'queued' || record.parked === undefined || record.parked > before) continue;
      const message = `its front member ${record.ownerMember} died before answering, and no retry under its idempotency key came within ${windowMs} ms: it was never run`;
      const dropped: ClusterRun = {
        ...record,
        state: 'settled',
        settledAt: isoTime(),
        result: { output: [], stopReason: 'aborted', diagnostic: message },
        startError: { code: 'ABORTED', message },
      };
      void records.transition(record.runId, dropped, revision).then(
        () => log.info({ runId: record.runId }, 'cluster: dropped a parked start nobody came back for'),
        () => undefined, // adopted or dropped meanwhile by another member
      );
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
