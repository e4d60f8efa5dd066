/**
 * The submitting side of a member: each provider the service sees in cluster mode is this
 * stand-in, which puts the start in the shared queue instead of running it here. Whichever
 * member claims it (this one included) runs the real provider (cluster-worker.ts); the stand-in
 * waits for the run's record to say the child exists, then hands the service a run whose result
 * is the record's outcome, whose events, tool calls and reports arrive through the member relay,
 * and whose cancel, interrupt, steering and dispose travel to the executing member on the run's
 * control subject.
 *
 * The stand-in offers what the real provider offers (capability by method presence):
 * - `sendMessage` when the real provider steers: a request to the executing member, confirmed
 *   by its answer (the service awaits it).
 * - `resume` when the real provider resumes: a continuation is a run of its own, queued and
 *   admitted like a start (same queue, same cap, claimed by compare-and-set). A member that
 *   can restore the child (in-process) may take it anywhere, from the mirrored session; a child
 *   that lives in an agent process (ACP), or works in a git worktree (made on the member that
 *   executed its first run, from that member's checkout), is pinned to the member holding it.
 * - `restore` when the real provider restores: a run only the record knows (a restarted front)
 *   comes back as a settled handle whose `resume` queues a continuation as above.
 *
 * A fresh start this member can execute at once on a spare ticket (a *local start*:
 * spare-tickets.ts, local-starts.ts `startHere`) skips the queue: its child starts here, and
 * its record is created when the start is answered (cluster-ledger.ts).
 *
 * Rules and failures:
 * - While NATS is unreachable a start, a resume and a message are refused with CLUSTER_UNAVAILABLE.
 * - Cancelled while queued: the record is moved to settled (aborted) by compare-and-set, so no
 *   member starts it; if a member claimed it first, that member is told to cancel it.
 * - A start the executing member could not make rejects with that member's error code.
 * - A message to a run whose executing member does not answer (gone, or partitioned) is
 *   RUN_STATE saying so: nothing was delivered, and the run follows the failover rules.
 * - A dispose while this member is stopping leaves a settled run's record settled (resumable
 *   after the member restarts, or through another member).
 * - A dispose nobody answers ends the run here (aborted, naming the silent member) and, by
 *   compare-and-set, in its record: a member taking the ticket over then only acknowledges it.
 * - One continuation at a time per child, across the pool: a resume is queued only once it has
 *   claimed the child (child-fence.ts); a second resume before the first settled, through this
 *   member or any other, is RUN_STATE naming the run that continues the child.
 * - The run's result waits for the record to settle, on whichever member finishes it: a takeover
 *   after its worker's death is invisible here except for the new `worker`.
 * - Once the run's client re-attached through another member (the record's `ownerMember` moved
 *   while it runs), this member hands it over: the result rejects with HANDED_OVER, the run's
 *   events stop coming here, and nothing more is sent to the executing member.
 * - Runs that outlive this member (its clients are gone with it) finish in the cluster; their
 *   outcome stays in their record.
 */
import { isoTime } from '../../common/iso-time.js';
import { SubagentError, type ContentBlock, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonResumeOptions, DaemonRun, ProviderStartRequest, RestoreContext, RunHost } from '../provider.js';
import type { ExecutionSlots } from '../store/run-ledger.js';
import { movedAway, ownerMovedFrom, sessionKeyOf, type ClusterRun, type QueuedStart } from './cluster-run.js';
import { claimChild } from './child-fence.js';
import { adoptedRecord } from './parked-starts.js';
import { lentRecord } from './lent-slots.js';
import type { ControlMessage } from './cluster-worker.js';
import { askExecutor as ask, steer } from './control-request.js';
import { remoteRun, type ClusterDaemonRun } from './remote-run.js';
import type { MemberRelay, ReportSink } from './member-relay.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { ClusterScheduler } from './scheduler.js';
import type { WorkspaceIdentities } from './workspace.js';
import type { AnswerWrites } from './answer-writes.js';
import { watchWorkspace } from './workspace-survey.js';

export interface FrontContext {
  readonly link: NatsLink;
  readonly names: ClusterNames;
  readonly scheduler: ClusterScheduler;
  readonly relay: MemberRelay;
  /** Calls `listener` with each newer record of `runId` until the returned function is called. */
  follow(runId: string, listener: (record: ClusterRun) => void): () => void;
  /** Whether this member is stopping (its service disposes every run it holds). */
  leaving: () => boolean;
  /** What the stand-in of `provider` on this member offers (its real provider's runtime); undefined for a provider it does not have. */
  runtimeOf(provider: string): DaemonProvider['runtime'] | undefined;
  /**
   * Fresh starts of this front waiting for their child, by run id: the worker of this member
   * calls one with the child's id instead of writing it (one round trip less before the answer).
   */
  readonly startsHere: Map<string, StartHere>;
  /**
   * Local starts (spare-tickets.ts) not answered yet, by run id: their record, `running` here,
   * which the front creates when it answers (with the child's id and the token's hash, one write:
   * cluster-ledger.ts). Until then the run is this member's alone.
   */
  readonly localStarts: Map<string, ClusterRun>;
  /** The write this front owes each of those starts (the child's id with the token's hash), which the worker waits for. */
  readonly answerWrites: AnswerWrites;
  /** The control of a run executing on this member, called directly (control-request.ts). */
  controlHere?: (runId: string, message: ControlMessage) => Promise<void> | undefined;
  /** A start's workspace identity, as this member's filesystem shows the parent's cwd. */
  readonly workspaces: WorkspaceIdentities;
  /** How long a queued run waits for a live member that serves its workspace (cluster.workspaceWaitMs). */
  readonly workspaceWaitMs: number;
  /** Parked starts a retry under their key is adopting through this member (pool-start-keys.ts), by run id. */
  readonly adoptions: Set<string>;
  /** The ticket of a run executing on this member, which its nested start may borrow (lent-slots.ts); undefined when it executes elsewhere. */
  lentTicket?: (parentRunId: string) => number | undefined;
  /** Executes a nested start's record, written `running` on its parent's lent slot, beside the slot loops (cluster-worker.ts). */
  executeLent?: (record: ClusterRun, cancel: AbortSignal) => Promise<void>;
  /** A fresh start that executes here at once on a spare ticket, skipping the queue (local-starts.ts); undefined: queue it. */
  startHere?: (record: ClusterRun, cancel: AbortSignal) => { record: ClusterRun; execute(): Promise<void> } | undefined;
  /** How this member's execution slots are held (for status). */
  executionSlots?: () => ExecutionSlots;
}

export type { ClusterDaemonRun };

/** A fresh start waiting on this member for its child, which executes here too. */
export interface StartHere {
  /** The child exists: the promise is the front's write of its id (with the token's hash). */
  started(childId: string, startedAt: string): Promise<void>;
  /** A local start whose child could not be made: it has no record to carry the error. */
  failed(error: unknown): void;
}

export function clusterProvider(inner: DaemonProvider, front: FrontContext): DaemonProvider {
  const runtime = { sendMessage: inner.runtime.sendMessage, resume: inner.runtime.resume };
  // A child that can be restored from its session continues anywhere; any other lives where it ran.
  const kind: ChainKind = { runtime, movable: inner.restore !== undefined };
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    inheritsParentContext: inner.inheritsParentContext,
    runtime,
    start: (request) => submit(inner.name, request, front, kind),
    ...(inner.restore && { restore: (childId: string, context: RestoreContext) => restoreHandle(childId, context, front, kind) }),
  };
}

interface ChainKind {
  readonly runtime: DaemonProvider['runtime'];
  readonly movable: boolean;
}

async function submit(provider: string, request: ProviderStartRequest, front: FrontContext, kind: ChainKind): Promise<ClusterDaemonRun> {
  front.link.assertOnline();
  request.signal.throwIfAborted();
  const { signal, host, report, progress: _progress, parentRunId, ...rest } = request;
  // A retry under the key of a start its dead front left parked: that start, under its run id, queued again.
  if (front.adoptions.has(host.runId)) return adopt(host, signal, report, front, kind);
  const queued: QueuedStart = rest;
  const workspace = await front.workspaces.of(request.parent.cwd);
  const record: ClusterRun = {
    runId: host.runId,
    owner: request.parent.sessionId,
    ownerMember: front.relay.memberId,
    provider,
    state: 'queued',
    queuedAt: isoTime(),
    request: queued,
    attempt: 0,
    workspace,
    ...(report && { reports: true }),
  };
  if (parentRunId === undefined) {
    // This member has a slot and a spare ticket, and nothing is queued: execute here at once; the
    // record is created when the start is answered (spare-tickets.ts).
    const here = front.startHere?.(record, signal);
    return here ? launch(here.record, host, signal, report, front, kind, here.execute) : launch(record, host, signal, report, front, kind);
  }
  // A nested start: its parent waits on it here, and lends it its execution slot (lent-slots.ts).
  const seq = front.lentTicket?.(parentRunId);
  if (seq === undefined) throw new SubagentError('RUN_STATE', `run ${parentRunId} does not execute on member ${front.relay.memberId}: its nested start has no slot to borrow`);
  const lent = lentRecord(record, parentRunId, seq, front.scheduler.worker);
  return launch(lent, host, signal, report, front, kind, () => front.executeLent!(lent, signal));
}

/** Adopts the parked start `host.runId` (parked-starts.ts): this member becomes its front and queues it again. */
async function adopt(host: RunHost, signal: AbortSignal, report: ReportSink | undefined, front: FrontContext, kind: ChainKind): Promise<ClusterDaemonRun> {
  const stored = await front.scheduler.records.refresh(host.runId);
  if (!stored || stored.record.state !== 'queued' || stored.record.parked === undefined) {
    throw new SubagentError('RUN_STATE', `the start of run ${host.runId} is no longer parked: it cannot be adopted`);
  }
  const record = adoptedRecord(stored.record, front.relay.memberId);
  return launch(record, host, signal, report, front, kind, () => front.scheduler.requeue(record, stored.revision));
}

/** Queues `record` (a start or a continuation) and resolves with its run once its child exists. */
async function launch(
  record: ClusterRun,
  host: RunHost,
  signal: AbortSignal,
  report: ReportSink | undefined,
  front: FrontContext,
  kind: ChainKind,
  queue: () => Promise<unknown> = () => front.scheduler.submit(record),
): Promise<ClusterDaemonRun> {
  const { runId } = record;
  front.relay.host(runId, host, report);
  let latest: ClusterRun = record;
  let settle!: (result: SubagentResult) => void;
  let handOver!: (error: SubagentError) => void;
  const result = new Promise<SubagentResult>((resolve, reject) => ((settle = resolve), (handOver = reject)));
  let ready!: () => void;
  let failed!: (error: unknown) => void;
  const started = new Promise<void>((resolve, reject) => ((ready = resolve), (failed = reject)));
  // A fresh start executing on this member: the worker hands over the child's id at once, and
  // the front writes it into the record together with the token's hash (cluster-ledger.ts).
  let childHere: Pick<ClusterRun, 'childId' | 'startedAt'> | undefined;
  if (record.resumes === undefined) {
    front.startsHere.set(runId, {
      started: (childId, startedAt) => {
        childHere = { childId, startedAt };
        latest = { ...latest, ...childHere };
        ready();
        return front.answerWrites.expect(runId);
      },
      failed,
    });
    if (record.local) front.localStarts.set(runId, record);
  }
  const unfollow = front.follow(runId, (next) => {
    latest = next.childId === undefined && childHere ? { ...next, ...childHere } : next;
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
  // Its client re-attached through another member, which holds the run now: touch nothing.
  const movedOff = (): boolean => latest.ownerMember !== front.relay.memberId;
  const control = (message: ControlMessage): Promise<void> =>
    movedOff() ? Promise.resolve() : ask(front, runId, message).catch(() => undefined); // nobody executes it any more (or not yet reachable): the record has the truth
  const onAbort = (): void => void cancel();
  const cancel = async (): Promise<void> => {
    if (latest.state === 'queued') {
      const seen = front.scheduler.records.seen(runId);
      const aborted: ClusterRun = { ...latest, state: 'settled', settledAt: isoTime(), result: { output: [], stopReason: 'aborted' } };
      const dequeued = seen && (await front.scheduler.records.transition(runId, aborted, seen.revision).then(() => true, () => false));
      if (dequeued) return;
    }
    await control({ op: 'cancel' });
  };
  signal.addEventListener('abort', onAbort, { once: true });
  let stopWatching: (() => void) | undefined;
  try {
    await queue();
    if (record.pin !== undefined) stopWatching = watchHolder(() => latest, front);
    // A local or lent start executes here already: only a queued one waits for a member.
    else if (record.state === 'queued') stopWatching = watchWorkspace(() => latest, { link: front.link, names: front.names, records: front.scheduler.records, waitMs: front.workspaceWaitMs });
    await started;
  } catch (error) {
    signal.removeEventListener('abort', onAbort);
    unfollow();
    front.relay.forget(runId);
    front.localStarts.delete(runId);
    if (signal.aborted) throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    if (error instanceof SubagentError) throw error;
    throw new SubagentError('CLUSTER_UNAVAILABLE', `the run could not be queued: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    stopWatching?.();
    front.startsHere.delete(runId);
  }
  const settled = (): boolean => latest.state === 'settled' || latest.state === 'disposed';
  // Disposed while nobody answers for it (its member died, or is cut off): the record says
  // disposed, so a member taking the ticket over only acknowledges it, and the run settles here.
  const abandon = async (): Promise<void> => {
    const worker = latest.worker;
    const who = worker ? `member ${worker.id} (pid ${worker.pid} on ${worker.host})` : 'its executing member';
    const result: SubagentResult = { output: [], stopReason: 'aborted', diagnostic: `disposed by its owner while ${who} did not answer` };
    const seen = front.scheduler.records.seen(runId);
    if (seen?.record.state === 'running') {
      const ended: ClusterRun = { ...seen.record, state: 'disposed', settledAt: isoTime(), result };
      await front.scheduler.records.transition(runId, ended, seen.revision).catch(() => undefined); // written meanwhile: the record has the truth
    }
    settle(result);
  };
  const sendMessage = (content: ContentBlock[]): Promise<void> => steer(front, latest, content);
  let disposed: Promise<void> | undefined;
  return remoteRun(() => latest, result, control, {
    dispose: () =>
      (disposed ??= (async () => {
        signal.removeEventListener('abort', onAbort);
        front.answerWrites.done(runId); // a start abandoned before its answer: the worker need not wait for that write
        front.localStarts.delete(runId);

        // A stopping member keeps its settled runs resumable (as a draining daemon keeps its
        // settled children): their records stay settled, and the executing member only releases them.
        const keep = front.leaving() && settled();
        const reached = movedOff() || (await ask(front, runId, { op: 'dispose', ...(keep && { keep }) }).then(() => true, () => false));
        if (!reached && !settled()) await abandon();
        unfollow();
        front.relay.forget(runId);
      })()),
    // Capability by presence: only what the real provider offers.
    ...(kind.runtime.sendMessage && { sendMessage }),
    ...(kind.runtime.resume && { resume: continuation(() => (settled() ? latest : undefined), host, report, front, kind) }),
  });
}

/**
 * `resume` of a chain's run: queues a continuation of its child under the run id the service
 * re-armed the host with. `from()` is the settled record to continue, or undefined while running.
 */
function continuation(from: () => ClusterRun | undefined, host: RunHost, report: ReportSink | undefined, front: FrontContext, kind: ChainKind) {
  // Set from the first check until the continuation settles: a second resume meanwhile is refused.
  let busy = false;
  return async (content: ContentBlock[], options: DaemonResumeOptions = {}): Promise<ClusterDaemonRun> => {
    front.link.assertOnline();
    const previous = from();
    if (!previous || previous.childId === undefined) throw new SubagentError('RUN_STATE', 'the run is still running; only a settled run can be resumed');
    if (busy) throw new SubagentError('RUN_STATE', `child ${previous.childId} is already running a continuation`);
    if (previous.state === 'disposed' && !kind.movable) {
      throw new SubagentError('RUN_STATE', `run ${previous.runId} is disposed: its child's agent process is gone`);
    }
    if (previous.state === 'disposed' && isolated(previous)) {
      throw new SubagentError('RUN_STATE', `run ${previous.runId} is disposed: its worktree was cleaned up on its member`);
    }
    busy = true;
    let run: ClusterDaemonRun;
    try {
      run = await queueContinuation(previous, previous.childId, content, host, options, report, front, kind);
    } catch (error) {
      busy = false;
      throw error;
    }
    void run.result.finally(() => (busy = false));
    return run;
  };
}

async function queueContinuation(
  previous: ClusterRun,
  childId: string,
  content: ContentBlock[],
  host: RunHost,
  { signal, traceparent }: DaemonResumeOptions,
  report: ReportSink | undefined,
  front: FrontContext,
  kind: ChainKind,
): Promise<ClusterDaemonRun> {
  // Only the member holding the agent process can continue a child that cannot be restored, and
  // only the member whose disk holds a child's worktree can continue it in that tree: it must
  // still hold it, or the continuation would wait in the queue for a member that is gone.
  const pin = kind.movable && !isolated(previous) ? undefined : previous.worker?.id;
  if (pin !== undefined) {
    await ask(front, previous.runId, { op: 'hold' }, (runId, who, reason) => holderGone(childId, runId, who, reason));
  }
  // The continuation's trace is its resume's caller's, never the first start's: the executing member continues it.
  const { traceparent: _firstStart, ...earlier } = previous.request;
  const next: ClusterRun = {
    runId: host.runId,
    owner: previous.owner,
    ownerMember: front.relay.memberId,
    provider: previous.provider,
    state: 'queued',
    queuedAt: isoTime(),
    request: { ...earlier, prompt: content, ...(traceparent !== undefined && { traceparent }) },
    attempt: 0,
    resumes: { runId: previous.runId, childId },
    session: sessionKeyOf(previous),
    ...(previous.workspace && { workspace: previous.workspace }),
    ...(previous.reports && { reports: true }),
    ...(pin !== undefined && { pin }),
  };
  // Across the pool: a continuation through another member may be resuming the same child.
  const release = await claimChild(front.scheduler.records, previous, childId, next.runId);
  try {
    return await launch(next, host, signal ?? new AbortController().signal, report, front, kind);
  } catch (error) {
    await release().catch(() => undefined); // unreleased, the claim lapses with its run's record (or STALE_CLAIM_MS)
    throw error;
  }
}

/** How often a queued pinned continuation checks that the member holding its child is still there. */
const HOLDER_CHECK_MS = 1000;

/**
 * While a pinned continuation waits in the queue, asks the member holding the child whether it
 * still does; when it does not answer (gone) or says no, the continuation ends unclaimed, by
 * compare-and-set from queued, with that as its start error: it would otherwise wait forever.
 * A check while this member is offline proves nothing and is skipped.
 */
function watchHolder(latest: () => ClusterRun, front: FrontContext): () => void {
  let checking = false;
  const timer = setInterval(() => {
    const run = latest();
    if (checking || run.state !== 'queued' || !run.resumes || !front.link.online) return;
    checking = true;
    void ask(front, run.resumes.runId, { op: 'hold' }, (runId, who, reason) => holderGone(run.resumes!.childId, runId, who, reason))
      .then(
        () => undefined,
        async (error: unknown) => {
          if (!(error instanceof SubagentError) || error.code !== 'RUN_STATE') return;
          const seen = front.scheduler.records.seen(run.runId);
          if (!seen || seen.record.state !== 'queued') return;
          const ended: ClusterRun = {
            ...seen.record,
            state: 'settled',
            settledAt: isoTime(),
            result: { output: [], stopReason: 'error', diagnostic: error.message },
            startError: { code: 'RUN_STATE', message: error.message },
          };
          await front.scheduler.records.transition(run.runId, ended, seen.revision).catch(() => undefined); // claimed meanwhile: its member decides
        },
      )
      .finally(() => (checking = false));
  }, HOLDER_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** The chain works in a git worktree, which lives on the disk of the member that made it. */
const isolated = (run: ClusterRun): boolean => run.request.isolation?.isolation === 'worktree';

const holderGone = (childId: string, runId: string, who: string, reason: string): string =>
  `child ${childId} of run ${runId} lives on ${who} (its agent process, or its git worktree), which did not answer (${reason}): it cannot be continued elsewhere`;

/** A run only its record knows (this front restarted): settled, resumable through the queue. */
async function restoreHandle(childId: string, context: RestoreContext, front: FrontContext, kind: ChainKind): Promise<DaemonRun> {
  const runId = context.host.runId;
  const stored = await front.scheduler.records.get(runId).catch((error: unknown) => {
    throw new SubagentError('CLUSTER_UNAVAILABLE', `the record of run ${runId} cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  });
  if (!stored || stored.record.childId !== childId) throw new SubagentError('RUN_STATE', `the cluster has no record of run ${runId} with child ${childId}`);
  const record = stored.record;
  return {
    id: childId,
    localAgent: undefined,
    result: Promise.resolve(context.result),
    dispose: async () => undefined, // nothing runs here; the record and the mirrored session stay
    resume: continuation(() => (record.state === 'settled' || record.state === 'disposed' ? record : undefined), context.host, context.report, front, kind),
  };
}
