/**
 * The time as ISO 8601, formatted at most once a millisecond: a run's start and end stamps and a
 * busy child's session events often fall in the same one, and formatting a Date is several
 * times the cost of reading the clock. The text is iso-time.ts's (which never asks ICU for the
 * time zone).
 */
import { isoTime } from './iso-time.js';

let stampedMs = Number.NaN;
let stampedIso = '';

export function isoNow(): string {
  const ms = Date.now();
  if (ms !== stampedMs) {
    stampedMs = ms;
    stampedIso = isoTime(ms);
  }
  return stampedIso;
}
