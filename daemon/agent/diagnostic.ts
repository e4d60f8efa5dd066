/** Diagnostics are safe failure detail with a hard size: 4 KiB of UTF-8, truncated visibly. */

export const MAX_DIAGNOSTIC_BYTES = 4096;
const MARKER = ' …[truncated]';

export function boundDiagnostic(text: string, maxBytes = MAX_DIAGNOSTIC_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let cut = maxBytes - Buffer.byteLength(MARKER);
  // Never split a character: back off while the cut lands on a continuation byte.
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut -= 1;
  return bytes.subarray(0, cut).toString('utf8') + MARKER;
}
