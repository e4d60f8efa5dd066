/**
 * ACP stop reasons in the seam's vocabulary; anything unknown is a failure. `max_turn_requests`
 * is a cap on model requests within a turn, not a token ceiling: the reference maps it to `error`.
 */
import type { SubagentStopReason } from '../../../protocol/index.js';

export function mapStopReason(reason: string): SubagentStopReason {
  switch (reason) {
    case 'end_turn':
      return 'completed';
    case 'max_tokens':
      return 'max-tokens';
    case 'refusal':
      return 'refusal';
    case 'cancelled':
      return 'aborted';
    default:
      return 'error';
  }
}
