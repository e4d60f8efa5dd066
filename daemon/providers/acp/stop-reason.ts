/** ACP stop reasons in the seam's vocabulary; anything unknown is a failure. */
import type { SubagentStopReason } from '../../../protocol/index.js';

export function mapStopReason(reason: string): SubagentStopReason {
  switch (reason) {
    case 'end_turn':
      return 'completed';
    case 'max_tokens':
    case 'max_turn_requests':
      return 'max-tokens';
    case 'refusal':
      return 'refusal';
    case 'cancelled':
      return 'aborted';
    default:
      return 'error';
  }
}
