/**
 * Where subagentd's open stop reason meets the harness's closed union: the one place a daemon
 * result becomes a harness result. A reason the harness does not know is a failure (the seam's
 * documented fall-through), reported as `error` with the original reason kept in the diagnostic.
 */
import { isKnownStopReason, type SubagentResult } from '../protocol/index.js';
import type { HarnessResult } from './harness-types.js';

export function toHarnessResult(result: SubagentResult): HarnessResult {
  const base = {
    output: result.output,
    ...(result.structured !== undefined && { structured: result.structured }),
  };
  if (isKnownStopReason(result.stopReason)) {
    return { ...base, stopReason: result.stopReason, ...(result.diagnostic !== undefined && { diagnostic: result.diagnostic }) };
  }
  const unknown = `the child stopped for a reason this harness does not know (${result.stopReason})`;
  return { ...base, stopReason: 'error', diagnostic: result.diagnostic === undefined ? unknown : `${unknown}: ${result.diagnostic}` };
}
