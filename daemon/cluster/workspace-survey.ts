/**
 * "Does any live member serve this workspace?", asked on core NATS while a start waits in the
 * queue, so that a run no member can execute in the right place is refused instead of waiting
 * forever (or, worse, running in the wrong checkout).
 *
 * - Every executing member answers on `<prefix>.workspace` with its own `WorkerRef` when its
 *   `WorkspaceGate` says yes, and stays silent otherwise.
 * - The front asks only once a run has been queued for `FIRST_SURVEY_MS` (a start claimed at once
 *   costs nothing), then every `SURVEY_EVERY_MS` while it stays queued. When no member said yes
 *   for `waitMs` (`cluster.workspaceWaitMs`), the run is ended unclaimed, by compare-and-set from
 *   queued, with WORKSPACE_UNAVAILABLE naming the cwd; a member that claimed it meanwhile wins.
 * - A member that answered yes and then died stops answering: the queued run is refused
 *   `waitMs` later unless another member serves it.
 * - While a survey goes unanswered, the front marks the record `unserved` (compare-and-set;
 *   cleared at the next yes): the run waits for a member, not for the cap, so no member's local
 *   starts stop for it (local-starts.ts, scheduler.ts `hasQueued`).
 * - While this member is offline nothing is concluded (its silence proves nothing).
 */
import type { Subscription } from '@nats-io/transport-node';
import { isoTime } from '../../common/iso-time.js';
import type { ClusterRun, WorkerRef } from './cluster-run.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { RunRecords } from './run-records.js';
import { describeWorkspace, type WorkspaceGate, type WorkspaceIdentity } from './workspace.js';

/** How long a queued run waits before its front first asks. */
const FIRST_SURVEY_MS = 250;
/** How often a queued run's front asks again. */
const SURVEY_EVERY_MS = 1000;
/** How long one question waits for the first yes. */
const SURVEY_TIMEOUT_MS = 1000;

export const DEFAULT_WORKSPACE_WAIT_MS = 10_000;

/** The member's side: answers for this member's workspaces. */
export function answerSurveys(link: NatsLink, names: ClusterNames, gate: WorkspaceGate, worker: WorkerRef): () => void {
  const subscription: Subscription = link.nc.subscribe(names.workspaceSubject, {
    callback: (error, msg) => {
      if (error || !msg.reply) return;
      let identity: WorkspaceIdentity;
      try {
        identity = msg.json<WorkspaceIdentity>();
      } catch {
        return;
      }
      if (typeof identity?.cwd !== 'string') return;
      void gate.serves(identity).then((ok) => {
        if (ok) msg.respond(JSON.stringify(worker));
      });
    },
  });
  return () => subscription.unsubscribe();
}

export interface SurveyContext {
  readonly link: NatsLink;
  readonly names: ClusterNames;
  readonly records: RunRecords<ClusterRun>;
  readonly waitMs: number;
}

/** The front's side: watches a queued run until it is claimed or ended; returns the stop. */
export function watchWorkspace(latest: () => ClusterRun, context: SurveyContext): () => void {
  const identity = latest().workspace;
  if (!identity) return () => undefined;
  let stopped = false;
  let lastYes = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const payload = JSON.stringify(identity);
  const round = async (): Promise<void> => {
    if (stopped || latest().state !== 'queued') return;
    if (context.link.online) {
      const answered = await context.link.nc.request(context.names.workspaceSubject, payload, { timeout: SURVEY_TIMEOUT_MS }).then(
        () => true,
        () => false,
      );
      if (stopped) return;
      if (answered) lastYes = Date.now();
      else if (Date.now() - lastYes >= context.waitMs) {
        await refuse(latest, context, identity);
        return;
      }
      await mark(latest, context, !answered);
    }
    timer = setTimeout(() => void round(), SURVEY_EVERY_MS);
    timer.unref();
  };
  timer = setTimeout(() => void round(), Math.min(FIRST_SURVEY_MS, context.waitMs));
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Sets or clears the queued record's `unserved` mark; a record claimed or changed meanwhile is left alone. */
async function mark(latest: () => ClusterRun, context: SurveyContext, unserved: boolean): Promise<void> {
  const seen = context.records.seen(latest().runId);
  if (!seen || seen.record.state !== 'queued' || (seen.record.unserved !== undefined) === unserved) return;
  const { unserved: _was, ...rest } = seen.record;
  const next: ClusterRun = unserved ? { ...rest, unserved: isoTime() } : rest;
  await context.records.transition(next.runId, next, seen.revision).catch(() => undefined);
}

async function refuse(latest: () => ClusterRun, context: SurveyContext, identity: WorkspaceIdentity): Promise<void> {
  const seen = context.records.seen(latest().runId);
  if (!seen || seen.record.state !== 'queued') return;
  const message = `no live cluster member serves ${describeWorkspace(identity)} (waited ${context.waitMs} ms): the run was not started anywhere`;
  const { unserved: _waited, ...queued } = seen.record;
  const ended: ClusterRun = {
    ...queued,
    state: 'settled',
    settledAt: isoTime(),
    result: { output: [], stopReason: 'error', diagnostic: message },
    startError: { code: 'WORKSPACE_UNAVAILABLE', message },
  };
  await context.records.transition(ended.runId, ended, seen.revision).catch(() => undefined); // claimed meanwhile: its member decides
}
