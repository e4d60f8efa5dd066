/**
 * A run taken over by a member other than the one its client started it on (a client that
 * re-attached here, its first member dead or simply another one), while the run executes on some
 * member of the pool. The service holds it like any run: its result is the outcome its record
 * gets, on whichever member finishes it (a takeover included); its events and tool calls come
 * through the member relay, the record's `ownerMember` now naming this member; cancel, interrupt,
 * steering and dispose travel to the executing member on the run's control subject
 * (control-request.ts), as the stand-in's do. It offers `sendMessage` exactly when this member's
 * stand-in of its provider does (the real provider steers).
 *
 * Rules and failures:
 * - The handle follows the record from the revision it was handed: a record that settled before
 *   the handle existed settles it at once.
 * - Once the record's owner moved on to another member (the client re-attached there, or back
 *   to its first member), the handle hands the run over: its result rejects with HANDED_OVER,
 *   and it sends the executing member nothing more.
 * - A cancel, interrupt or dispose nobody answers (the executing member is gone and no other took
 *   the run over yet) is dropped: the record has the truth, and the run follows the failover rules.
 * - A steering message is answered as on the run's first member: delivered once the child took
 *   it; RUN_STATE when nobody answers (nothing was delivered) or the run settled; HANDED_OVER
 *   once its client re-attached it elsewhere.
 */
import type { ContentBlock, SubagentError, SubagentResult } from '../../protocol/index.js';
import type { RunHost } from '../provider.js';
import type { FrontContext } from './cluster-provider.js';
import { movedAway, ownerMovedFrom, type ClusterRun } from './cluster-run.js';
import type { ControlMessage } from './cluster-worker.js';
import { askExecutor, steer } from './control-request.js';
import { remoteRun, type ClusterDaemonRun } from './remote-run.js';

export function adoptedRun(record: ClusterRun, host: RunHost, signal: AbortSignal, front: FrontContext): ClusterDaemonRun {
  const { runId } = record;
  let latest = record;
  let settle!: (result: SubagentResult) => void;
  let handOver!: (error: SubagentError) => void;
  const result = new Promise<SubagentResult>((resolve, reject) => ((settle = resolve), (handOver = reject)));
  let unfollow = (): void => undefined;
  const observe = (next: ClusterRun): void => {
    latest = next;
    if ((next.state === 'settled' || next.state === 'disposed') && next.result) settle(next.result);
    if (ownerMovedFrom(next, front.relay.memberId)) {
      unfollow();
      front.relay.forget(runId);
      handOver(movedAway(next));
    }
  };
  front.relay.host(runId, host);
  unfollow = front.follow(runId, observe);
  const seen = front.scheduler.records.seen(runId);
  if (seen) observe(seen.record);
  const control = (message: ControlMessage): Promise<void> =>
    // Re-attached through yet another member (or back to its first): that member holds it now.
    latest.ownerMember !== front.relay.memberId ? Promise.resolve() : askExecutor(front, runId, message).catch(() => undefined);
  const onAbort = (): void => void control({ op: 'cancel' });
  signal.addEventListener('abort', onAbort, { once: true });
  let disposed: Promise<void> | undefined;
  return remoteRun(() => latest, result, control, {
    dispose: () =>
      (disposed ??= (async () => {
        signal.removeEventListener('abort', onAbort);
        await control({ op: 'dispose' });
        unfollow();
        front.relay.forget(runId);
      })()),
    // Capability by presence, as the stand-in's.
    ...(front.runtimeOf(record.provider)?.sendMessage && { sendMessage: (content: ContentBlock[]) => steer(front, latest, content) }),
  });
}
