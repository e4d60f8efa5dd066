/**
 * The seam's bound on failure text: a run's `diagnostic` is at most 4 KiB of UTF-8, cut on a
 * character boundary and visibly marked. One home for the in-process agent, the ACP provider and
 * the service's output budget, so every diagnostic a client sees obeys the same limit.
 */

export const MAX_DIAGNOSTIC_BYTES = 4096;
const MARKER = ' …[truncated]';

/** `text` within `maxBytes` of UTF-8 (marker included); unchanged when it already fits. */
export function boundDiagnostic(text: string, maxBytes: number = MAX_DIAGNOSTIC_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let cut = Math.max(0, maxBytes - Buffer.byteLength(MARKER));
  // Never split a character: back off while the cut lands on a continuation byte.
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut -= 1;
  return bytes.subarray(0, cut).toString('utf8') + MARKER;
}
