/**
 * Answers to `session/request_permission` that need no human. Among options of the right kind
 * the one-shot variant is preferred, so a policy never grants or refuses more than this request.
 */
import type { PermissionOption, RequestPermissionOutcome } from '@agentclientprotocol/sdk';

const CANCELLED: RequestPermissionOutcome = { outcome: 'cancelled' };

function pick(options: readonly PermissionOption[], kinds: readonly PermissionOption['kind'][]): RequestPermissionOutcome | undefined {
  for (const kind of kinds) {
    const option = options.find((o) => o.kind === kind);
    if (option) return { outcome: 'selected', optionId: option.optionId };
  }
  return undefined;
}

/** The first reject option (one-shot first), or `cancelled` when the agent offered none. */
export function denyOutcome(options: readonly PermissionOption[]): RequestPermissionOutcome {
  return pick(options, ['reject_once', 'reject_always']) ?? CANCELLED;
}

/** The first allow option (one-shot first); with none offered there is nothing to allow, so deny. */
export function allowOutcome(options: readonly PermissionOption[]): RequestPermissionOutcome {
  return pick(options, ['allow_once', 'allow_always']) ?? denyOutcome(options);
}

export function cancelledOutcome(): RequestPermissionOutcome {
  return CANCELLED;
}
