/**
 * Every JetStream name the cluster uses, in one place. All members of one pool must agree on
 * them, so they derive from one prefix (default `subagentd`; tests and side-by-side pools on
 * one NATS server pick another). Subjects of the queue and of the session events are disjoint:
 * a work-queue stream refuses overlapping consumers, and the two streams must not capture each
 * other's messages.
 */
export interface ClusterNames {
  /** Work-queue stream of slot tickets: one message per admitted run. */
  readonly queueStream: string;
  readonly queueSubject: string;
  /** The one durable pull consumer every member pulls tickets from; its max_ack_pending is the cap. */
  readonly slotsConsumer: string;
  /** KV bucket of run records. */
  readonly recordsBucket: string;
  /** Stream of session events, one subject per run. */
  readonly sessionStream: string;
  /** Every run's session subject: what the session stream captures. */
  readonly sessionSubjects: string;
  sessionSubject(runId: string): string;
  /** Core subject a member listens on: notifications for the clients connected to it. */
  memberSubject(memberId: string): string;
  /** Core subject a front asks the member executing a run on: cancel, dispose, interrupt, steering. */
  controlSubject(memberId: string, runId: string): string;
  /** What a member listens on for every run it executes: one subscription, not one per run. */
  controlSubjects(memberId: string): string;
  /** KV bucket of the pool's idempotency keys (pool-start-keys.ts). */
  readonly keysBucket: string;
  /** Core subject every executing member listens on: "who serves this workspace?" (workspace-survey.ts). */
  readonly workspaceSubject: string;
}

/** Subject tokens may not contain `.`, `*`, `>` or whitespace; prefixes are checked once here. */
const TOKEN = /^[A-Za-z0-9_-]+$/;

export function clusterNames(prefix = 'subagentd'): ClusterNames {
  if (!TOKEN.test(prefix)) throw new Error(`cluster prefix "${prefix}" must be letters, digits, - or _`);
  const upper = prefix.toUpperCase().replace(/-/g, '_');
  return {
    queueStream: `${upper}_QUEUE`,
    queueSubject: `${prefix}.queue.tickets`,
    slotsConsumer: 'slots',
    recordsBucket: `${upper}_RUNS`,
    keysBucket: `${upper}_KEYS`,
    sessionStream: `${upper}_SESSIONS`,
    sessionSubjects: `${prefix}.session.*`,
    sessionSubject: (runId) => `${prefix}.session.${token(runId)}`,
    memberSubject: (memberId) => `${prefix}.member.${token(memberId)}`,
    controlSubject: (memberId, runId) => `${prefix}.control.${token(memberId)}.${token(runId)}`,
    controlSubjects: (memberId) => `${prefix}.control.${token(memberId)}.*`,
    workspaceSubject: `${prefix}.workspace`,
  };
}

/** Run ids and member ids are base64url or similar; anything else is refused, never escaped. */
function token(value: string): string {
  if (!TOKEN.test(value)) throw new Error(`"${value}" cannot be a subject token`);
  return value;
}
