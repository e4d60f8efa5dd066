/**
 * An ACP agent's failure report: the reason, how the process ended and the tail of its stderr,
 * within the seam's diagnostic bound (protocol/diagnostic.ts).
 */
import { boundDiagnostic } from '../../../protocol/index.js';

/** How much of an agent's stderr a failure report quotes. */
export const STDERR_TAIL_BYTES = 2048;

/** "reason; agent exited with code 3; stderr (last N bytes): …", bounded. */
export function describeFailure(reason: string, exit: string | undefined, stderrTail: string): string {
  const parts = [reason];
  if (exit) parts.push(exit);
  const tail = stderrTail.trimEnd();
  parts.push(tail ? `stderr tail:\n${tail}` : 'stderr was empty');
  return boundDiagnostic(parts.join('; '));
}
