/**
 * Requests from a run's front to the member executing it, on that member's control subject for
 * the run (`<prefix>.control.<memberId>.<runId>`, answered by cluster-worker.ts): cancel,
 * interrupt, steering, dispose, and whether a child is still held. Both handles a front holds for
 * a pool run (the stand-in's, cluster-provider.ts, and a re-attached one's, adopted-run.ts) go
 * through here.
 *
 * Rules and failures:
 * - While NATS is unreachable a request is refused with CLUSTER_UNAVAILABLE.
 * - The executing member is the one the run's record names; when this member's view names none
 *   or the named member says the run is not there (taken over, claimed a moment ago), the record
 *   is read from the server and the request goes once more to the member it names.
 * - A request nobody answers within CONTROL_TIMEOUT_MS (the member is gone, or cut off), or that
 *   no member executes, is RUN_STATE naming the member the record says executes the run; the
 *   answer's typed error is rethrown as is.
 * - A run executing on this member is controlled directly, with no trip through NATS.
 * - Steering a settled run is RUN_STATE; steering a run whose client re-attached it through
 *   another member is HANDED_OVER (that member holds it now); neither reaches the executing member.
 */
import { SubagentError, type ContentBlock, type WorkerRef } from '../../protocol/index.js';
import { movedAway, type ClusterRun } from './cluster-run.js';
import type { ControlAnswer, ControlMessage } from './cluster-worker.js';
import type { MemberRelay } from './member-relay.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { ClusterScheduler } from './scheduler.js';

/** How long a control request waits for the executing member's answer. */
export const CONTROL_TIMEOUT_MS = 5000;

/** What a front needs of its member for these requests (a FrontContext has it). */
interface Front {
  readonly link: NatsLink;
  readonly names: ClusterNames;
  readonly scheduler: ClusterScheduler;
  readonly relay: MemberRelay;
  /** The control of a run executing on this member, called directly; undefined when it executes elsewhere. */
  readonly controlHere?: (runId: string, message: ControlMessage) => Promise<void> | undefined;
}

/** What a control request that nobody answered says: a steering message was not delivered. */
const undelivered = (runId: string, who: string, reason: string): string =>
  `run ${runId}: ${who} did not answer (${reason}); nothing was delivered. If it is gone, another member takes the run over after the lease.`;

/** A control request to the member executing `runId`, answered by it; RUN_STATE when nobody answers. */
export async function askExecutor(front: Front, runId: string, message: ControlMessage, unanswered = undelivered): Promise<void> {
  front.link.assertOnline();
  const here = front.controlHere?.(runId, message);
  if (here) {
    await here.catch((error: unknown) => {
      throw error instanceof SubagentError ? error : new SubagentError('RUN_STATE', error instanceof Error ? error.message : String(error));
    });
    return;
  }
  const records = front.scheduler.records;
  const recorded = async (): Promise<WorkerRef | undefined> => (await records.refresh(runId).catch(() => undefined))?.record.worker;
  // A view that names nobody may lag a claim: the server's record says.
  let worker = records.seen(runId)?.record.worker ?? (await recorded());
  let reason = 'no member executes the run';
  if (worker) {
    const refused = await askMember(front, worker.id, runId, message);
    if (refused === undefined) return;
    reason = refused;
    // It said no or did not answer: the record may name a member this view had not seen (a claim, a takeover).
    const now = await recorded();
    if (now && now.id !== worker.id) {
      worker = now;
      const again = await askMember(front, now.id, runId, message);
      if (again === undefined) return;
      reason = again;
    }
  }
  const who = worker ? `member ${worker.id} (pid ${worker.pid} on ${worker.host})` : 'its executing member';
  throw new SubagentError('RUN_STATE', unanswered(runId, who, reason));
}

/** One request to `memberId`: undefined once done there, else why not (no answer, or the run is not there); its typed error is thrown. */
async function askMember(front: Front, memberId: string, runId: string, message: ControlMessage): Promise<string | undefined> {
  let answer: ControlAnswer;
  try {
    const reply = await front.link.nc.request(front.names.controlSubject(memberId, runId), JSON.stringify(message), { timeout: CONTROL_TIMEOUT_MS });
    answer = reply.json<ControlAnswer>();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  if ('error' in answer) throw new SubagentError(answer.error.code, answer.error.message);
  return 'ok' in answer ? undefined : 'it does not execute the run';
}

/** A steering message for the run `latest` records, delivered once the executing member's child took it. */
export async function steer(front: Front, latest: ClusterRun, content: ContentBlock[]): Promise<void> {
  if (latest.state === 'settled' || latest.state === 'disposed') throw new SubagentError('RUN_STATE', `run ${latest.runId} has settled; nothing reads this message`);
  if (latest.ownerMember !== front.relay.memberId) throw movedAway(latest);
  await askExecutor(front, latest.runId, { op: 'send', content });
}
