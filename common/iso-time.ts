/**
 * ISO 8601 UTC timestamps (`2026-12-03T14:05:09.123Z`, what `Date.prototype.toISOString` gives)
 * built from the UTC fields. Why not `toISOString` itself: on Node 22 it asks ICU for the host's
 * time zone on its first call (V8's date cache), which maps in ICU's zone data, about 1.1 MiB of
 * every process's RSS, for a string that is UTC anyway; the UTC getters never ask.
 *
 * Rules: same text as `toISOString` for years 0–9999; outside them (and for an invalid time) it is
 * `toISOString`'s own answer, its RangeError included.
 */

/** `ms` (epoch milliseconds; default now) as an ISO 8601 UTC timestamp. */
export function isoTime(ms: number = Date.now()): string {
  const date = new Date(ms);
  const year = date.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) return date.toISOString();
  return (
    `${pad(year, 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}` +
    `T${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}.${pad(date.getUTCMilliseconds(), 3)}Z`
  );
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

let stampedMs = Number.NaN;
let stampedIso = '';

/**
 * Now, formatted at most once a millisecond: a run's start and end stamps and a busy child's
 * session events often fall in the same one, and formatting costs several times reading the clock.
 */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== stampedMs) {
    stampedMs = ms;
    stampedIso = isoTime(ms);
  }
  return stampedIso;
}
