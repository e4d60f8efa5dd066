/**
 * Error codes. Every error the daemon answers is a JSON-RPC error whose `data.code` is one of
 * `SubagentErrorCode`; the numeric JSON-RPC code is fixed per name (table below) so that
 * clients in other languages can branch on either.
 */

export const SUBAGENT_ERROR_CODES = {
  // The seam's own codes.
  DUPLICATE_PROVIDER: -32010,
  NO_PROVIDER: -32011,
  UNSUPPORTED_CAPABILITY: -32012,
  UNSUPPORTED_SCHEMA: -32013,
  DEPTH_EXCEEDED: -32014,
  // Added by the wire.
  INVALID_REQUEST: -32602,
  UNKNOWN_RUN: -32020,
  NOT_OWNER: -32021,
  OVERLOADED: -32022,
  SHUTTING_DOWN: -32023,
  PROTOCOL_VERSION: -32024,
  NOT_INITIALIZED: -32025,
  UNAUTHORIZED: -32026,
  /** The provider does not support this runtime operation (sendMessage, resume). */
  UNSUPPORTED_OPERATION: -32027,
  /** The run is not in a state that allows the operation (e.g. resume before it settled). */
  RUN_STATE: -32028,
  /** The provider failed to start the child; the message says why. */
  START_FAILED: -32029,
  /**
   * A draining daemon handed the run to the next daemon (checkpointed, to be continued there):
   * it has no outcome here. Re-attach with the run token and wait on the next daemon.
   */
  HANDED_OVER: -32032,
  /** A continuable child has no durable record to be resumed from. */
  NOT_RESUMABLE: -32033,
  /** Cluster mode: the shared NATS server cannot be reached, so no run can be admitted now. */
  CLUSTER_UNAVAILABLE: -32034,
  /** Cluster mode: a record changed since it was read (compare-and-set on a stale revision). */
  REVISION_CONFLICT: -32035,
  /** Cluster mode: no live member serves the start's workspace (its cwd, at the parent's repository and commit). */
  WORKSPACE_UNAVAILABLE: -32036,
  /** A token budget is spent (`limits.clientTokensPerDay`): the message says when it resets. */
  BUDGET_EXCEEDED: -32037,
  /** The start was cancelled before the child was ready. */
  ABORTED: -32800,
  // Client side only: the daemon went away or stopped answering.
  DAEMON_UNAVAILABLE: -32030,
  DAEMON_UNRESPONSIVE: -32031,
} as const;

export type SubagentErrorCode = keyof typeof SUBAGENT_ERROR_CODES;

/** JSON-RPC 2.0's own codes, used for envelope-level failures. */
export const JSONRPC_ERRORS = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

/** The `data` of every subagentd JSON-RPC error. */
export interface SubagentErrorData {
  readonly code: SubagentErrorCode;
  /** For INVALID_REQUEST: the JSON pointer of the offending field. */
  readonly field?: string;
  /** For DEPTH_EXCEEDED. */
  readonly attemptedDepth?: number;
  readonly maxDepth?: number;
  /** For PROTOCOL_VERSION. */
  readonly daemonVersion?: string;
  readonly clientVersion?: string;
  /** For DAEMON_UNAVAILABLE: why the daemon closed the connection, when it said so. */
  readonly reason?: string;
}

/**
 * Before closing a connection on its own initiative (untrustworthy framing, no `initialize` in
 * time, a connection cap) the daemon sends one error with id null whose message starts with this.
 */
export const CLOSING_MESSAGE_PREFIX = 'closing: ';

/** A typed seam error. Thrown on both sides of the wire with the same code. */
export class SubagentError extends Error {
  override readonly name = 'SubagentError';
  constructor(
    readonly code: SubagentErrorCode,
    message: string,
    readonly details: Omit<SubagentErrorData, 'code'> = {},
  ) {
    super(message);
  }

  get data(): SubagentErrorData {
    return { code: this.code, ...this.details };
  }
}

export function isSubagentErrorCode(value: unknown): value is SubagentErrorCode {
  return typeof value === 'string' && Object.hasOwn(SUBAGENT_ERROR_CODES, value);
}
