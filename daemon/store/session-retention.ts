/**
 * Session logs outlive their runs so ops can `inspect` them; retention bounds how long. Run at
 * start and then daily: logs untouched for longer than the retention are removed (a live child
 * appends to its log, so it is never old).
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';

export function pruneSessions(dir: string, maxAgeMs: number, log: Logger, now = Date.now()): number {
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0; // no sessions yet
  }
  for (const name of names) {
    if (!name.endsWith('.jsonl')) continue;
    const file = join(dir, name);
    try {
      if (now - statSync(file).mtimeMs > maxAgeMs) {
        rmSync(file);
        removed += 1;
      }
    } catch (error) {
      log.warn({ err: error, file }, 'could not prune a session log');
    }
  }
  if (removed > 0) log.info({ removed, dir, maxAgeDays: maxAgeMs / 86_400_000 }, 'pruned session logs past retention');
  return removed;
}
