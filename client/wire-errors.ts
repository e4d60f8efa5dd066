/**
 * Turning what the wire says into the seam's typed errors. A daemon error carries its seam code
 * in `data.code`; library-level codes that mean "the connection is gone" become
 * DAEMON_UNAVAILABLE so callers have one code to branch on.
 */
import { ConnectionError, ErrorCodes, ResponseError } from 'vscode-jsonrpc/node';
import {
  SUBAGENT_ERROR_CODES,
  SubagentError,
  isSubagentErrorCode,
  type SubagentErrorCode,
  type SubagentErrorData,
  type ValidationFailure,
} from '../protocol/index.js';

type Details = Omit<SubagentErrorData, 'code'>;

/** Codes vscode-jsonrpc itself produces when the connection dies under a request. */
const CONNECTION_GONE = new Set<number>([
  ErrorCodes.PendingResponseRejected,
  ErrorCodes.ConnectionInactive,
  ErrorCodes.MessageWriteError,
  ErrorCodes.MessageReadError,
]);

const CODE_BY_NUMBER = new Map<number, SubagentErrorCode>(
  (Object.entries(SUBAGENT_ERROR_CODES) as Array<[SubagentErrorCode, number]>).map(([name, value]) => [value, name]),
);
// e.g. a bare -32800 (cancelled) or -32602 (invalid params) without `data` still maps by number.

/** Copy only the documented detail fields, with their documented types: `data` is inbound. */
function detailsOf(data: unknown): Details {
  if (typeof data !== 'object' || data === null) return {};
  const source = data as Record<string, unknown>;
  const out: { -readonly [K in keyof Details]: Details[K] } = {};
  if (typeof source['field'] === 'string') out.field = source['field'];
  if (typeof source['attemptedDepth'] === 'number') out.attemptedDepth = source['attemptedDepth'];
  if (typeof source['maxDepth'] === 'number') out.maxDepth = source['maxDepth'];
  if (typeof source['daemonVersion'] === 'string') out.daemonVersion = source['daemonVersion'];
  if (typeof source['clientVersion'] === 'string') out.clientVersion = source['clientVersion'];
  if (typeof source['reason'] === 'string') out.reason = source['reason'];
  return out;
}

/**
 * Map a rejected request to the error its caller sees. `lost` supplies the DAEMON_UNAVAILABLE
 * error for connection-level failures. A JSON-RPC error with no seam meaning is returned as is
 * (a `ResponseError` still carries its numeric code).
 */
export function fromWire(error: unknown, lost: () => SubagentError): unknown {
  if (error instanceof ConnectionError) return lost();
  if (!(error instanceof ResponseError)) return error;
  const data: unknown = error.data;
  const named = typeof data === 'object' && data !== null ? (data as { code?: unknown }).code : undefined;
  if (isSubagentErrorCode(named)) return new SubagentError(named, error.message, detailsOf(data));
  if (CONNECTION_GONE.has(error.code)) return lost();
  const byNumber = CODE_BY_NUMBER.get(error.code);
  return byNumber ? new SubagentError(byNumber, error.message, detailsOf(data)) : error;
}

/** The error for a daemon payload that failed its schema. */
export function invalidFromDaemon(what: string, failure: ValidationFailure): SubagentError {
  return new SubagentError('INVALID_REQUEST', `the daemon sent an invalid ${what}: ${failure.message}`, {
    field: failure.field,
  });
}

/** A JSON-RPC error the daemon can read, for replies to its requests. */
export function toWire(error: SubagentError): ResponseError<SubagentErrorData> {
  return new ResponseError(SUBAGENT_ERROR_CODES[error.code], error.message, error.data);
}

/** The daemon handed the run to its successor (a draining restart): wait again, do not fail. */
export function isHandedOver(error: unknown): error is SubagentError {
  return error instanceof SubagentError && error.code === 'HANDED_OVER';
}
