/**
 * Retention of the pool's run records: a record settled longer ago than the runs' retention
 * (`retention.runs.maxAgeDays`, default 30 days, as for a daemon's own stored runs) is purged
 * from the bucket, and every member's view drops it (run-records.ts). Without it the bucket, and
 * each member's view (every record in memory, replayed whole when a member starts), grew with
 * every run the pool ever made.
 *
 * - Only settled records go (told disposed or not); a queued or running one never does, however
 *   old: it may still change.
 * - Every member sweeps its own view, a few seconds after it joins and then every hour (at least
 *   twice per retention period). A purge is a compare-and-set on the revision the view holds, so
 *   a record written meanwhile (a continuation's claim on it) stays, and of members sweeping at
 *   once one removes it.
 */
import type { Logger } from 'pino';
import { isoTime } from '../../common/iso-time.js';
import type { ClusterRun } from './cluster-run.js';
import type { RunRecords } from './run-records.js';

const HOUR_MS = 3_600_000;
/** The first sweep after a member joins: past its start, not at it. */
const FIRST_SWEEP_MS = 5000;

export function sweepRecords(records: RunRecords<ClusterRun>, maxAgeMs: number, log: Logger): () => void {
  const everyMs = Math.max(1000, Math.min(HOUR_MS, maxAgeMs / 2));
  const sweep = async (): Promise<void> => {
    const cutoff = isoTime(Date.now() - maxAgeMs);
    let removed = 0;
    for (const { record, revision } of records.all()) {
      if ((record.state !== 'settled' && record.state !== 'disposed') || (record.settledAt ?? record.queuedAt) >= cutoff) continue;
      // Written meanwhile, or removed by another member: left to the next sweep.
      if (await records.remove(record.runId, revision).then(() => true, () => false)) removed += 1;
    }
    if (removed > 0) log.info({ removed, maxAgeDays: maxAgeMs / 86_400_000 }, 'cluster: removed pool run records past retention');
  };
  let timer = setTimeout(function again() {
    void sweep().finally(() => {
      timer = setTimeout(again, everyMs);
      timer.unref();
    });
  }, Math.min(FIRST_SWEEP_MS, everyMs));
  timer.unref();
  return () => clearTimeout(timer);
}
