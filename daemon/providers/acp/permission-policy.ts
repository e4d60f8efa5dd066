/**
 * Answers to `session/request_permission` that need no human. Among options of the right kind
 * the one-shot variant is preferred, so a policy never grants or refuses more than this request.
 * `allow-in-workspace` approves only what can be told to stay in the workspace: file work
 * (read, edit, delete, move, search; think) whose every named location is inside the root after
 * symlinks are resolved. A shell command (`execute`), a fetch, a mode switch, an unknown kind or
 * an edit that names no location cannot be confined, so it is refused.
 */
import { realpathSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import type { PermissionOption, RequestPermissionOutcome, ToolCallUpdate } from '@agentclientprotocol/sdk';
import { isInside } from '../../workspace/workspace.js';

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

/** Kinds whose effect is on the files they name (or on nothing). */
const FILE_KINDS = new Set(['read', 'search', 'think', 'edit', 'delete', 'move']);
/** Kinds that change files: they must name where. */
const WRITING_KINDS = new Set(['edit', 'delete', 'move']);

/** Why `allow-in-workspace` refuses this tool call, or undefined when it stays in `root`. */
export function outsideWorkspace(toolCall: ToolCallUpdate, root: string): string | undefined {
  const kind = toolCall.kind ?? 'other';
  if (!FILE_KINDS.has(kind)) return `a "${kind}" tool call cannot be confined to the workspace`;
  const paths = (toolCall.locations ?? []).map((location) => location.path);
  if (paths.length === 0 && WRITING_KINDS.has(kind)) return `an "${kind}" tool call that names no file`;
  const realRoot = realOrSelf(root);
  const escaped = paths.find((path) => typeof path !== 'string' || !isAbsolute(path) || !isInside(realRoot, realNearest(path)));
  return escaped === undefined ? undefined : `${JSON.stringify(escaped)} is outside the workspace ${root}`;
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/** The real path of `path`, or of its nearest existing ancestor with the rest appended. */
function realNearest(path: string): string {
  let existing = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return resolve(realpathSync(existing), ...rest.reverse());
    } catch {
      const parent = dirname(existing);
      if (parent === existing) return resolve(path);
      rest.push(relative(parent, existing));
      existing = parent;
    }
  }
}
