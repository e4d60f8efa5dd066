/**
 * The seam's start-time checks, in its fixed order: capabilities (outputSchema, maxDepth,
 * toolFilter, persona — the first missing one fails and the provider is never called;
 * protocol/capability-check.ts), the
 * maxDepth value, the schema subset; then the child's depth from the parent reference.
 */
import { SubagentError, assertCapabilities, depthProblem, type ParentRef, type StartParams } from '../../protocol/index.js';
import type { DaemonProvider } from '../provider.js';
import { assertObjectJsonSchema } from './output-schema.js';

export function checkStartRequest(provider: DaemonProvider, params: StartParams): void {
  assertCapabilities(provider, params);
  if (params.maxDepth !== undefined) requireDepthValue(params.maxDepth, '/maxDepth');
  if (params.outputSchema !== undefined) assertObjectJsonSchema(params.outputSchema);
}

/** A depth is a non-negative safe integer: no fraction, no -0, no NaN or Infinity (protocol/depth.ts). */
function requireDepthValue(value: unknown, field: string): number {
  const problem = depthProblem(value, field);
  if (problem !== undefined) throw new SubagentError('INVALID_REQUEST', problem, { field });
  return value as number;
}

/**
 * Child depth = 1 + max(stored delegationDepth, runtime subagentDepth); absent means 0, a
 * malformed present value is an error (never read as 0), and an unrepresentable child depth is a
 * range error even without a cap. A defined maxDepth is an absolute cap on the child's depth.
 */
export function childDepth(parent: ParentRef, maxDepth: number | undefined): number {
  const stored = parent.delegationDepth === undefined ? 0 : requireDepthValue(parent.delegationDepth, '/parent/delegationDepth');
  const runtime = parent.subagentDepth === undefined ? 0 : requireDepthValue(parent.subagentDepth, '/parent/subagentDepth');
  const depth = Math.max(stored, runtime) + 1;
  if (!Number.isSafeInteger(depth)) {
    throw new SubagentError('INVALID_REQUEST', `child depth ${depth} is outside the safe-integer range`, { field: '/parent' });
  }
  if (maxDepth !== undefined && depth > maxDepth) {
    throw new SubagentError('DEPTH_EXCEEDED', `child depth ${depth} exceeds maxDepth ${maxDepth}`, {
      attemptedDepth: depth,
      maxDepth,
    });
  }
  return depth;
}
