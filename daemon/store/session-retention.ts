/**
 * Session logs outlive their runs so ops can `inspect` them; retention bounds how long and how
 * many. Run at start, daily and on `daemon/gc`: logs untouched for longer than the age limit are
 * removed, then the least recently written past the count limit. A live child appends to its
 * log, so it is never old; `live` protects it from the count limit too. A file that cannot be
 * removed is logged and skipped.
 */
import { readdirSync, rmSync, statSync } from '../../common/node-builtins.js';
import { join } from 'node:path';
import type { Logger } from 'pino';

export function pruneSessions(
  dir: string,
  maxAgeMs: number,
  log: Logger,
  now = Date.now(),
  maxCount = Number.POSITIVE_INFINITY,
  live: (sessionId: string) => boolean = () => false,
): number {
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0; // no sessions yet
  }
  const kept: Array<{ file: string; mtimeMs: number }> = [];
  const remove = (file: string): void => {
    try {
      rmSync(file);
      removed += 1;
    } catch (error) {
      log.warn({ err: error, file }, 'could not prune a session log');
    }
  };
  for (const name of names) {
    if (!name.endsWith('.jsonl')) continue;
    const file = join(dir, name);
    try {
      const { mtimeMs } = statSync(file);
      if (now - mtimeMs > maxAgeMs) remove(file);
      else if (!live(name.slice(0, -'.jsonl'.length))) kept.push({ file, mtimeMs });
    } catch (error) {
      log.warn({ err: error, file }, 'could not prune a session log');
    }
  }
  if (kept.length > maxCount) {
    kept.sort((a, b) => b.mtimeMs - a.mtimeMs);
    for (const { file } of kept.slice(maxCount)) remove(file);
  }
  if (removed > 0) log.info({ removed, dir, maxAgeDays: maxAgeMs / 86_400_000, maxCount }, 'pruned session logs past retention');
  return removed;
}
