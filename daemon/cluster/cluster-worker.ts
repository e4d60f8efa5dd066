/**
 * The executing side of a member: `slots` loops, each taking a run from the shared queue
 * (scheduler.ts) only while this member is connected, running it with the member's own
 * provider, and writing its outcome to the run's record before the ticket is acknowledged.
 *
 * - A fresh claim starts the child; its events and tool calls go to the owner's member
 *   (member-relay.ts); its session is mirrored to the cluster as it grows (session-mirror.ts).
 * - A takeover (the previous worker went silent) rebuilds the child's session file from the
 *   mirror, restores the child through its provider and tells it to continue: the run keeps its
 *   id and completes here. A provider without `restore` (ACP: the agent process died with its
 *   member) cannot migrate: the run ends `error` saying so. A run claimed before its child
 *   existed simply starts.
 * - Every record write is a compare-and-set from the revision this member last wrote. A lapsed
 *   lease (no heartbeat confirmed for ack_wait: partitioned) stops the child at once and writes
 *   nothing more: the run now belongs to whoever the server hands the ticket to next, and the
 *   revision fences any late write of ours. So one run never has two live children.
 * - `close` (daemon stop) stops pulling and lets go of the runs executing here without
 *   recording an outcome: their tickets come back after ack_wait and another member continues them.
 */
import { writeFile, mkdir } from 'node:fs/promises';
import type { Logger } from 'pino';
import { SubagentError, type InterruptLevel, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonRun, RunHost } from '../provider.js';
import { sessionFilePath } from '../ops/paths.js';
import type { ClusterRun } from './cluster-run.js';
import type { MemberRelay, RelayTarget } from './member-relay.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { Claim, ClusterScheduler } from './scheduler.js';
import type { Lease } from './slot-queue.js';
import type { SessionEvents } from './session-events.js';
import { SessionMirror } from './session-mirror.js';

/** What a child taken over is told: another member ran its earlier steps, which are above. */
export const TAKEOVER_PROMPT =
  'The service running you was restarted on another machine while you worked; your earlier steps are above. Continue the task from where you stopped.';

export type ControlMessage = { op: 'cancel' } | { op: 'dispose' } | { op: 'interrupt'; level: InterruptLevel };

export interface ClusterWorkerOptions {
  /** Runs this member executes at once. */
  readonly slots: number;
  readonly sessionsDir: string;
  readonly log: Logger;
  readonly maxOutputBytes?: number;
}

interface Execution {
  readonly runId: string;
  /** Where the child's events and calls go; follows the record's `ownerMember`. */
  readonly target: RelayTarget;
  readonly abort: AbortController;
  readonly lease: Lease;
  lost: boolean;
  run?: DaemonRun;
  revision: number;
  record: ClusterRun;
  closeControl(): void;
}

export class ClusterWorker {
  private readonly stop = new AbortController();
  private readonly executing = new Map<string, Execution>();
  private loops: Promise<void>[] = [];
  private unfollowOwners: (() => void) | undefined;

  constructor(
    private readonly link: NatsLink,
    private readonly names: ClusterNames,
    private readonly scheduler: ClusterScheduler,
    private readonly relay: MemberRelay,
    private readonly sessions: SessionEvents,
    private readonly providers: ReadonlyMap<string, DaemonProvider>,
    private readonly options: ClusterWorkerOptions,
  ) {}

  start(): void {
    // A client that re-attached through another member moved the run's owner: follow it.
    this.unfollowOwners = this.scheduler.records.onChange((record) => {
      const execution = this.executing.get(record.runId);
      if (execution && ours(execution, record)) execution.target.ownerMember = record.ownerMember;
    });
    for (let i = 0; i < this.options.slots; i++) this.loops.push(this.loop());
  }

  /** Runs executing here now (for status and tests). */
  get busy(): number {
    let n = 0;
    for (const execution of this.executing.values()) if (!execution.lost && execution.record.state === 'running') n += 1;
    return n;
  }

  /** Stops pulling and lets go of every run here; pulls still pending end when the link closes. */
  async close(): Promise<void> {
    this.stop.abort();
    this.unfollowOwners?.();
    for (const execution of this.executing.values()) this.letGo(execution, 'the member is stopping');
    await Promise.allSettled([...this.executing.values()].map((e) => e.run?.dispose()));
  }

  private async loop(): Promise<void> {
    while (!this.stop.signal.aborted) {
      if (!this.link.online) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      const claim = await this.scheduler.next(this.stop.signal, (run) => this.providers.has(run.provider)).catch((error: unknown) => {
        this.options.log.warn({ err: error }, 'cluster: taking a run failed');
        return undefined;
      });
      if (claim) await this.execute(claim);
    }
  }

  /** Runs one claimed run until it settles and its ticket is acknowledged. */
  private async execute(claim: Claim): Promise<void> {
    const { lease } = claim;
    const runId = claim.run.runId;
    const log = this.options.log.child({ runId, provider: claim.run.provider, attempt: claim.run.attempt });
    const subscription = this.link.nc.subscribe(this.names.controlSubject(runId), {
      callback: (error, msg) => {
        if (error) return;
        void this.control(execution, msg.json<ControlMessage>()).finally(() => msg.reply && msg.respond('{}'));
      },
    });
    const execution: Execution = {
      runId,
      target: { runId, ownerMember: claim.run.ownerMember },
      abort: new AbortController(),
      lease,
      lost: false,
      revision: claim.revision,
      record: claim.run,
      closeControl: () => subscription.unsubscribe(),
    };
    this.executing.set(runId, execution);
    lease.keepAlive(() => this.letGo(execution, 'its lease lapsed (no heartbeat reached NATS for ack_wait)'));
    let mirror: SessionMirror | undefined;
    const remote = this.relay.remoteHost(execution.target, {
      log,
      ...(this.options.maxOutputBytes !== undefined && { maxOutputBytes: this.options.maxOutputBytes }),
    });
    const host: RunHost = { ...remote, emit: (event) => (remote.emit(event), mirror?.schedule()) };
    const provider = this.providers.get(claim.run.provider)!;
    try {
      const resumeFrom = claim.takeover && claim.run.childId !== undefined ? claim.run.childId : undefined;
      if (resumeFrom !== undefined) {
        const { run, stored } = await this.takeOver(claim, resumeFrom, provider, host, execution.abort.signal);
        execution.run = run;
        mirror = new SessionMirror(this.sessions, runId, run.localAgent, stored);
        log.info({ child: resumeFrom }, 'cluster: took over a run from a silent member');
      } else {
        execution.run = await provider.start({ ...claim.run.request, signal: execution.abort.signal, host });
        mirror = new SessionMirror(this.sessions, runId, execution.run.localAgent);
        await mirror.sync();
        await this.record(execution, { childId: execution.run.id, startedAt: new Date().toISOString() });
      }
    } catch (error) {
      mirror?.stop();
      if (!execution.lost) {
        const code = error instanceof SubagentError ? error.code : 'START_FAILED';
        const message = error instanceof Error ? error.message : String(error);
        await this.record(execution, {
          state: 'settled',
          settledAt: new Date().toISOString(),
          result: { output: [], stopReason: 'error', diagnostic: message },
          ...(!claim.takeover && { startError: { code, message } }),
        }).catch((e: unknown) => log.warn({ err: e }, 'cluster: recording a failed start failed'));
        await lease.ack().catch(() => undefined);
      }
      this.forget(execution);
      return;
    }
    const result = await execution.run.result.catch(
      (error: unknown): SubagentResult => ({ output: [], stopReason: 'error', diagnostic: error instanceof Error ? error.message : String(error) }),
    );
    await mirror.sync().catch((error: unknown) => log.warn({ err: error }, 'cluster: the session mirror is behind'));
    mirror.stop();
    if (execution.lost) return;
    await this.record(execution, { state: 'settled', settledAt: new Date().toISOString(), result }).catch((error: unknown) =>
      log.warn({ err: error }, 'cluster: recording the outcome failed'),
    );
    if (!execution.lost) await lease.ack().catch((error: unknown) => log.warn({ err: error }, 'cluster: acknowledging the ticket failed'));
  }

  /** Rebuilds the child's session from the mirror, restores it, and resumes it. */
  private async takeOver(
    claim: Claim,
    childId: string,
    provider: DaemonProvider,
    host: RunHost,
    signal: AbortSignal,
  ): Promise<{ run: DaemonRun; stored: number }> {
    const record = claim.run;
    const gone = claim.previous ? `member ${claim.previous.id} (pid ${claim.previous.pid} on ${claim.previous.host})` : 'its member';
    if (!provider.restore) {
      throw new SubagentError(
        'UNSUPPORTED_OPERATION',
        `run ${record.runId} cannot migrate: provider "${record.provider}" keeps its child in a process that died with ${gone}, and has no session to resume from`,
      );
    }
    const lines = await this.sessions.readAll(record.runId);
    if (lines.length === 0) throw new SubagentError('RUN_STATE', `run ${record.runId}: ${gone} stopped before any of its session reached the cluster`);
    await mkdir(this.options.sessionsDir, { recursive: true, mode: 0o700 });
    await writeFile(sessionFilePath(this.options.sessionsDir, childId), lines.map((line) => `${JSON.stringify(line)}\n`).join(''), { mode: 0o600 });
    const request = record.request;
    const restored = await provider.restore(childId, {
      host,
      result: { output: [], stopReason: 'aborted' },
      ...(request.persona !== undefined && { persona: request.persona }),
      ...(request.toolFilter && { toolFilter: request.toolFilter }),
      ...(request.maxDepth !== undefined && { maxDepth: request.maxDepth }),
    });
    if (!restored.resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" restored run ${record.runId} but cannot resume it`);
    const run = await restored.resume([{ type: 'text', text: TAKEOVER_PROMPT }], { signal });
    return { run, stored: lines.length };
  }

  private async control(execution: Execution, message: ControlMessage): Promise<void> {
    if (message.op === 'cancel') execution.abort.abort(new SubagentError('ABORTED', 'cancelled by its owner'));
    else if (message.op === 'interrupt') (execution.run?.interrupt ?? (() => execution.abort.abort()))(message.level);
    else {
      execution.abort.abort(new SubagentError('ABORTED', 'disposed by its owner'));
      await execution.run?.dispose().catch(() => undefined);
      if (!execution.lost) {
        await execution.run?.result.catch(() => undefined);
        await this.recordLatest(execution, { state: 'disposed' }).catch(() => undefined);
      }
      this.forget(execution);
    }
  }

  /**
   * Compare-and-set from the revision this member holds. On a conflict the record is read again:
   * if it still names this member at this attempt under this lease, only the owner's side wrote
   * (the token's hash, a moved owner) and the write is made again on top of it; otherwise the run
   * is no longer ours.
   */
  private async record(execution: Execution, patch: Partial<ClusterRun>): Promise<void> {
    for (;;) {
      const next: ClusterRun = { ...execution.record, ...patch };
      try {
        execution.revision = await this.scheduler.records.transition(execution.runId, next, execution.revision);
        execution.record = next;
        return;
      } catch (error) {
        if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) throw error;
        const current = await this.scheduler.records.get(execution.runId);
        if (!current || !ours(execution, current.record)) {
          this.letGo(execution, 'another member took the run over');
          throw error;
        }
        execution.record = current.record;
        execution.revision = current.revision;
        execution.target.ownerMember = current.record.ownerMember;
      }
    }
  }

  /** For dispose, which may follow a settle this member wrote: re-read, and only if we still run it. */
  private async recordLatest(execution: Execution, patch: Partial<ClusterRun>): Promise<void> {
    const current = await this.scheduler.records.get(execution.runId);
    if (!current || current.record.worker?.id !== this.scheduler.worker.id) return;
    execution.revision = current.revision;
    execution.record = current.record;
    await this.record(execution, patch);
  }

  /** The run is not ours any more: stop the child, write nothing, keep the ticket unacknowledged. */
  private letGo(execution: Execution, why: string): void {
    if (execution.lost) return;
    execution.lost = true;
    execution.lease.stop();
    this.options.log.warn({ runId: execution.runId }, `cluster: letting go of a run: ${why}`);
    execution.abort.abort(new SubagentError('ABORTED', `this member let go of the run: ${why}`));
  }

  private forget(execution: Execution): void {
    execution.closeControl();
    this.executing.delete(execution.runId);
  }
}

/** The record still names this execution: same worker, attempt and lease, and not ended by another. */
function ours(execution: Execution, record: ClusterRun): boolean {
  const mine = execution.record;
  return (
    record.worker?.id === mine.worker?.id &&
    record.attempt === mine.attempt &&
    record.lease === mine.lease &&
    (record.state === 'running' || record.state === mine.state)
  );
}
