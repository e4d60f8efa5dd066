/**
 * The seam's rule for a depth value (`maxDepth`, `delegationDepth`, `subagentDepth`): a
 * non-negative safe integer. Fractions, NaN, Infinity, negatives and -0 are refused, as the
 * reference harness refuses them. One home for both sides: the daemon checks what arrives, and
 * the client checks what JSON cannot carry (-0 serialises as 0, so only the sender can see it).
 */

/** Why `value` is not a depth, as the error message says it; undefined when it is one. */
export function depthProblem(value: unknown, field: string): string | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)) return undefined;
  const shown = Object.is(value, -0) ? '-0' : typeof value === 'number' ? String(value) : JSON.stringify(value) ?? String(value);
  return `${field} must be a non-negative safe integer, got ${shown}`;
}
