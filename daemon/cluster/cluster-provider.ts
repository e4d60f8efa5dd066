/**
 * The submitting side of a member: each provider the service sees in cluster mode is this
 * stand-in, which puts the start in the shared queue instead of running it here. Whichever
 * member claims it (this one included) runs the real provider (cluster-worker.ts); the stand-in
 * waits for the run's record to say the child exists, then hands the service a run whose result
 * is the record's outcome, whose events and tool calls arrive through the member relay, and whose
 * cancel, interrupt and dispose travel to the executing member on the run's control subject.
 *
 * Rules and failures:
 * - While NATS is unreachable a start is refused at once with CLUSTER_UNAVAILABLE.
 * - Cancelled while queued: the record is moved to settled (aborted) by compare-and-set, so no
 *   member starts it; if a member claimed it first, that member is told to cancel it.
 * - A start the executing member could not make rejects with that member's error code.
 * - The run's result waits for the record to settle, on whichever member finishes it: a takeover
 *   after its worker's death is invisible here except for the new `worker`.
 * - Runs that outlive this member (its clients are gone with it) finish in the cluster; their
 *   outcome stays in their record.
 * - Once the run's client re-attached through another member (the record's `ownerMember` moved
 *   while it runs), this member hands it over: the result rejects with HANDED_OVER, the run's
 *   events stop coming here, and nothing more is sent to the executing member.
 */
import { SubagentError, type InterruptLevel, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonRun, ProviderStartRequest } from '../provider.js';
import { movedAway, ownerMovedFrom, type ClusterRun, type QueuedStart, type WorkerRef } from './cluster-run.js';
import type { ControlMessage } from './cluster-worker.js';
import type { MemberRelay } from './member-relay.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { ClusterScheduler } from './scheduler.js';

export interface FrontContext {
  readonly link: NatsLink;
  readonly names: ClusterNames;
  readonly scheduler: ClusterScheduler;
  readonly relay: MemberRelay;
  /** Calls `listener` with each newer record of `runId` until the returned function is called. */
  follow(runId: string, listener: (record: ClusterRun) => void): () => void;
}

/** A cluster run as the service holds it: `worker` names the member executing it now. */
export interface ClusterDaemonRun extends DaemonRun {
  readonly worker: WorkerRef | undefined;
}

export function clusterProvider(inner: DaemonProvider, front: FrontContext): DaemonProvider {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    inheritsParentContext: inner.inheritsParentContext,
    // Resume and steering would need the child's session on the submitting member: not offered.
    runtime: { sendMessage: false, resume: false },
    start: (request) => submit(inner.name, request, front),
  };
}

async function submit(provider: string, request: ProviderStartRequest, front: FrontContext): Promise<ClusterDaemonRun> {
  front.link.assertOnline();
  request.signal.throwIfAborted();
  const runId = request.host.runId;
  const { signal, host: _host, report: _report, ...rest } = request;
  const queued: QueuedStart = rest;
  const record: ClusterRun = {
    runId,
    owner: request.parent.sessionId,
    ownerMember: front.relay.memberId,
    provider,
    state: 'queued',
    queuedAt: new Date().toISOString(),
    request: queued,
    attempt: 0,
  };
  front.relay.host(runId, request.host);
  let latest: ClusterRun = record;
  let settle!: (result: SubagentResult) => void;
  let handOver!: (error: SubagentError) => void;
  const result = new Promise<SubagentResult>((resolve, reject) => ((settle = resolve), (handOver = reject)));
  let ready!: () => void;
  let failed!: (error: unknown) => void;
  const started = new Promise<void>((resolve, reject) => ((ready = resolve), (failed = reject)));
  const unfollow = front.follow(runId, (next) => {
    latest = next;
    if (next.startError) failed(new SubagentError(next.startError.code, next.startError.message));
    else if (next.childId !== undefined) ready();
    if ((next.state === 'settled' || next.state === 'disposed') && next.result) {
      if (next.childId === undefined) failed(new SubagentError('ABORTED', 'start was cancelled before the child was ready'));
      settle(next.result);
    }
    if (ownerMovedFrom(next, front.relay.memberId)) {
      unfollow();
      front.relay.forget(runId);
      handOver(movedAway(next));
    }
  });
  const control = (message: ControlMessage): Promise<void> =>
    // Its client re-attached through another member, which holds the run now: touch nothing.
    latest.ownerMember !== front.relay.memberId ? Promise.resolve() : front.link.nc.request(front.names.controlSubject(runId), JSON.stringify(message), { timeout: 5000 }).then(
      () => undefined,
      () => undefined, // nobody executes it any more (or not yet reachable): the record has the truth
    );
  const onAbort = (): void => void cancel();
  const cancel = async (): Promise<void> => {
    if (latest.state === 'queued') {
      const seen = front.scheduler.records.seen(runId);
      const aborted: ClusterRun = { ...latest, state: 'settled', settledAt: new Date().toISOString(), result: { output: [], stopReason: 'aborted' } };
      const dequeued = seen && (await front.scheduler.records.transition(runId, aborted, seen.revision).then(() => true, () => false));
      if (dequeued) return;
    }
    await control({ op: 'cancel' });
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await front.scheduler.submit(record);
    await started;
  } catch (error) {
    signal.removeEventListener('abort', onAbort);
    unfollow();
    front.relay.forget(runId);
    if (signal.aborted) throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    if (error instanceof SubagentError) throw error;
    throw new SubagentError('CLUSTER_UNAVAILABLE', `the run could not be queued: ${error instanceof Error ? error.message : String(error)}`);
  }
  let disposed: Promise<void> | undefined;
  return {
    id: latest.childId!,
    localAgent: undefined,
    result,
    get worker() {
      return latest.worker;
    },
    interrupt: (level: InterruptLevel) => void control({ op: 'interrupt', level }),
    dispose: () =>
      (disposed ??= (async () => {
        signal.removeEventListener('abort', onAbort);
        await control({ op: 'dispose' });
        unfollow();
        front.relay.forget(runId);
      })()),
  };
}
