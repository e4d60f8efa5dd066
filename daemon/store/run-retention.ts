/**
 * Retention of the stored runs, by age and by count, with defaults. It applies to the archive
 * only (settled and disposed runs): a run that may still change is never removed. A run's age
 * is from its settledAt (startedAt when it has none). The archive is in about start order, so
 * when the count limit removes nothing and the oldest archived run is young enough, the pass
 * reads nothing more; otherwise it rewrites the archive from the first run the count keeps.
 */
import type { RunIndex } from './run-index.js';
import { isoTime } from '../../common/iso-time.js';

export interface RetentionLimits {
  /** Days a run (or session log) is kept after it settled (or was last written). */
  readonly maxAgeDays: number;
  /** How many are kept at most; the oldest go first. */
  readonly maxCount: number;
}

export const DEFAULT_RUN_RETENTION: RetentionLimits = { maxAgeDays: 30, maxCount: 100_000 };
export const DEFAULT_SESSION_RETENTION: RetentionLimits = { maxAgeDays: 14, maxCount: 10_000 };

/** Removes archived runs past the limits; returns how many archive lines it removed. */
export function pruneRuns(index: RunIndex, limits: RetentionLimits, now = Date.now()): number {
  const archive = index.archive;
  const from = Math.max(0, archive.count - limits.maxCount);
  const cutoff = isoTime(now - limits.maxAgeDays * 86_400_000);
  const young = (run: { settledAt?: string; startedAt: string }): boolean => (run.settledAt ?? run.startedAt) >= cutoff;
  const oldest = archive.at(from);
  if (from === 0 && (oldest === undefined || young(oldest))) return 0;
  return archive.rewrite(from, young);
}
