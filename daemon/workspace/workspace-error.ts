/**
 * The one error the workspace raises. `kind` is what callers branch on (the ACP handlers map it
 * to JSON-RPC codes, the tools show the message); the message names the path as it was asked.
 */
export type WorkspaceErrorKind =
  | 'invalid-path'
  | 'outside-root'
  | 'not-found'
  | 'not-a-file'
  | 'not-a-directory'
  | 'hard-linked'
  | 'too-large'
  | 'io';

export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
  constructor(
    readonly kind: WorkspaceErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export function errnoOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

/** A system error from touching `shown`, as a WorkspaceError (already-typed errors pass through). */
export function fsError(shown: string, error: unknown): WorkspaceError {
  if (error instanceof WorkspaceError) return error;
  switch (errnoOf(error)) {
    case 'ENOENT':
      return new WorkspaceError('not-found', `${shown} does not exist`);
    case 'ELOOP':
      return new WorkspaceError('outside-root', `${shown}: refusing to follow a symlink swapped in after the check`);
    case 'EISDIR':
      return new WorkspaceError('not-a-file', `${shown} is a directory`);
    case 'ENOTDIR':
      return new WorkspaceError('not-a-directory', `${shown}: a parent is not a directory`);
    case 'ENXIO':
      return new WorkspaceError('not-a-file', `${shown} is not a regular file`);
    default:
      return new WorkspaceError('io', `${shown}: ${errnoOf(error) ?? (error instanceof Error ? error.message : String(error))}`);
  }
}
