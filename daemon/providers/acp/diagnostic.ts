/**
 * Bounded failure text. Diagnostics travel to clients and into logs, so every one is capped in
 * UTF-8 bytes (the seam's limit for `SubagentResult.diagnostic`) and truncated visibly.
 */
export const MAX_DIAGNOSTIC_BYTES = 4096;
/** How much of an agent's stderr a failure report quotes. */
export const STDERR_TAIL_BYTES = 2048;

const MARK = ' …[truncated]';

export function boundUtf8(text: string, maxBytes: number = MAX_DIAGNOSTIC_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.byteLength <= maxBytes) return text;
  let end = Math.max(0, maxBytes - Buffer.byteLength(MARK));
  // Back off to a character boundary so the cut never produces a replacement character.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8') + MARK;
}

/** "reason; agent exited with code 3; stderr (last N bytes): …", bounded. */
export function describeFailure(reason: string, exit: string | undefined, stderrTail: string): string {
  const parts = [reason];
  if (exit) parts.push(exit);
  const tail = stderrTail.trimEnd();
  parts.push(tail ? `stderr tail:\n${tail}` : 'stderr was empty');
  return boundUtf8(parts.join('; '));
}
