/**
 * Brings a child back on this member from the cluster's copy of its session: for a takeover (the
 * member running it went silent) and for a continuation whose child is not held here. The
 * child's session file is rebuilt from its mirrored stream (session-mirror.ts), the child is
 * restored through its provider's `restore`, as a restarted daemon restores a checkpointed child,
 * and resumed with its next message: TAKEOVER_PROMPT, or the continuation's own prompt.
 *
 * Refused, each with the typed error the run ends with:
 * - A provider without `restore` (ACP: the agent process died with its member) cannot bring a
 *   child back: UNSUPPORTED_OPERATION. So cannot one that restores but cannot resume.
 * - A takeover of a worktree run: the tree is on the silent member's disk (UNSUPPORTED_OPERATION).
 * - A pinned continuation (its child lives in its member's agent process) whose child that member
 *   no longer holds: RUN_STATE.
 * - A child of which the cluster never stored any session: RUN_STATE.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { SubagentError, type ContentBlock, type SubagentResult } from '../../protocol/index.js';
import type { DaemonProvider, DaemonRun, RunHost } from '../provider.js';
import { sessionFilePath } from '../ops/paths.js';
import { sessionKeyOf, type ClusterRun } from './cluster-run.js';
import type { ReportSink } from './member-relay.js';
import type { Claim } from './scheduler.js';
import type { SessionEvents } from './session-events.js';

/** What a child taken over is told: another member ran its earlier steps, which are above. */
export const TAKEOVER_PROMPT =
  'The service running you was restarted on another machine while you worked; your earlier steps are above. Continue the task from where you stopped.';

/** The host and report sink the restored child speaks through: its line to the run's owner. */
export interface ChildLine {
  readonly host: RunHost;
  readonly report: ReportSink | undefined;
}

/** A child brought back: its `stored` session lines are already in the mirror. */
export interface Restored {
  readonly run: DaemonRun;
  readonly stored: number;
}

export class ChildRestore {
  constructor(
    private readonly sessions: SessionEvents,
    /** Where this member keeps session files: the rebuilt one goes there. */
    private readonly sessionsDir: string,
  ) {}

  /** A takeover: rebuilds the child's session from the mirror, restores it, and resumes it. */
  async takeOver(claim: Pick<Claim, 'run' | 'previous'>, childId: string, provider: DaemonProvider, line: ChildLine, signal: AbortSignal): Promise<Restored> {
    const record = claim.run;
    const gone = claim.previous ? `member ${claim.previous.id} (pid ${claim.previous.pid} on ${claim.previous.host})` : 'its member';
    if (!provider.restore) {
      throw new SubagentError(
        'UNSUPPORTED_OPERATION',
        `run ${record.runId} cannot migrate: provider "${record.provider}" keeps its child in a process that died with ${gone}, and has no session to resume from`,
      );
    }
    // Its worktree is on the silent member's disk: continuing here would work in another tree.
    if (record.request.isolation?.isolation === 'worktree') {
      throw new SubagentError(
        'UNSUPPORTED_OPERATION',
        `run ${record.runId} cannot migrate: it works in a git worktree on the disk of ${gone}; its committed turns are on its branch in that member's repository`,
      );
    }
    const prompt = [{ type: 'text' as const, text: TAKEOVER_PROMPT }];
    return this.fromMirror(record, childId, provider, line, signal, prompt, undefined, `${gone} stopped before any of its session reached the cluster`);
  }

  /**
   * A continuation (`record.resumes`) whose child is not held on this member: the child restored
   * from the mirror, with `previousResult` (its previous run's), and given the new message.
   */
  async continuation(record: ClusterRun, provider: DaemonProvider, line: ChildLine, signal: AbortSignal, previousResult: SubagentResult | undefined): Promise<Restored> {
    const { runId: previousRunId, childId } = record.resumes!;
    if (record.pin !== undefined) {
      throw new SubagentError('RUN_STATE', `child ${childId} of run ${previousRunId} is no longer held on this member (disposed or lost); it cannot be continued`);
    }
    if (!provider.restore) {
      throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" cannot bring back child ${childId} on another member`);
    }
    return this.fromMirror(record, childId, provider, line, signal, record.request.prompt, previousResult, 'the cluster never stored any of its session');
  }

  private async fromMirror(
    record: ClusterRun,
    childId: string,
    provider: DaemonProvider,
    line: ChildLine,
    signal: AbortSignal,
    prompt: ContentBlock[],
    previousResult: SubagentResult | undefined,
    whyEmpty: string,
  ): Promise<Restored> {
    const lines = await this.sessions.readAll(sessionKeyOf(record));
    if (lines.length === 0) throw new SubagentError('RUN_STATE', `run ${record.runId}: ${whyEmpty}`);
    await mkdir(this.sessionsDir, { recursive: true, mode: 0o700 });
    await writeFile(sessionFilePath(this.sessionsDir, childId), lines.map((entry) => `${JSON.stringify(entry)}\n`).join(''), { mode: 0o600 });
    const request = record.request;
    const restored = await provider.restore!(childId, {
      host: line.host,
      result: previousResult ?? { output: [], stopReason: 'aborted' },
      ...(line.report && { report: line.report }),
      ...(request.persona !== undefined && { persona: request.persona }),
      ...(request.toolFilter && { toolFilter: request.toolFilter }),
      ...(request.maxDepth !== undefined && { maxDepth: request.maxDepth }),
    });
    if (!restored.resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" restored run ${record.runId} but cannot resume it`);
    const run = await restored.resume(prompt, { signal });
    return { run, stored: lines.length };
  }
}
