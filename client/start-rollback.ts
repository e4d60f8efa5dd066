/**
 * The seam's rule for a start aborted before it fulfilled: it rejects with ABORTED, and never
 * fulfils a run that then ends aborted. Over the wire the daemon may have published the child
 * before the abort reached it (the answer was already on its way), so the client rolls that child
 * back itself: cancel, then dispose, without making the caller wait for either.
 */
import { SubagentError } from '../protocol/index.js';
import type { RunRecord } from './run-record.js';
import type { ClientLogger } from './types.js';

export function rollBackStart(
  record: RunRecord,
  cancel: (record: RunRecord) => void,
  dispose: (record: RunRecord) => Promise<void>,
  logger: ClientLogger,
): SubagentError {
  record.result.catch(() => undefined); // nobody holds this run: its end is not the caller's error
  cancel(record);
  dispose(record).catch((error: unknown) => logger.error(`disposing run ${record.runId} after its start was aborted failed`, error));
  return new SubagentError('ABORTED', 'the start was aborted before it was answered; its child was cancelled and disposed');
}
