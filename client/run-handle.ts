/**
 * The `SubagentRun` a caller holds for a daemon run. The optional methods are added only when
 * the provider's descriptor advertises them, so `'sendMessage' in run` is the capability check.
 */
import type { ContentBlock, StartResult, SubagentResult } from '../protocol/index.js';
import type { RunRecord } from './run-record.js';
import type { RemoteSubagentRun, ResumeOptions } from './types.js';

export type { ResumeOptions } from './types.js';

/** What a handle asks of the service; each takes the run's record. */
export interface RunControls {
  dispose(record: RunRecord): Promise<void>;
  sendMessage(record: RunRecord, content: ContentBlock[]): void;
  resume(record: RunRecord, content: ContentBlock[], options?: ResumeOptions): Promise<RemoteSubagentRun>;
  wait(record: RunRecord): Promise<SubagentResult>;
  /**
   * Whether a failed dispose may be sent again (it never reached a daemon the service is
   * reconnecting to). Otherwise the failure is memoised like a success.
   */
  mayRetryDispose?(error: unknown): boolean;
}

export function createRunHandle(record: RunRecord, started: StartResult, controls: RunControls): RemoteSubagentRun {
  const { runtime } = record;
  let disposing: Promise<void> | undefined;
  return Object.freeze({
    id: record.runId,
    childId: started.id,
    runToken: started.runToken,
    localAgent: undefined,
    provider: record.provider,
    result: record.result,
    // Memoised: one `run/dispose` on the wire however often, and however concurrently, it is called
    // (unless it failed with the connection and the service reconnects: then the next call retries).
    dispose: () =>
      (disposing ??= controls.dispose(record).catch((error: unknown) => {
        if (controls.mayRetryDispose?.(error)) disposing = undefined;
        throw error;
      })),
    wait: () => controls.wait(record),
    ...(runtime.sendMessage ? { sendMessage: (content: ContentBlock[]) => controls.sendMessage(record, content) } : {}),
    ...(runtime.resume
      ? { resume: (content: ContentBlock[], options?: ResumeOptions) => controls.resume(record, content, options) }
      : {}),
  });
}
