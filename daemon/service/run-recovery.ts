/**
 * Runs a previous daemon left behind, and runs this daemon leaves to the next one.
 *
 * - At start, `markInterrupted`: a run the dead daemon left running or starting is recorded as
 *   settled `error` with a diagnostic saying so, so its owner learns it by run/wait and ops never
 *   see it running.
 * - At start, `continueCheckpointed`: a child a draining daemon checkpointed is restored from its
 *   session log and told to go on, under its old run id and token, detached until its owner
 *   re-attaches. One that cannot be continued is recorded settled `error`, saying why.
 * - On resume of a run only the ledger knows, `restore`: its provider brings the child back from
 *   its log, or the resume is UNSUPPORTED_OPERATION.
 * - At a drain's timeout, `checkpoint`: a still-running child whose provider can restore it is
 *   recorded `checkpointed` for the next daemon; its waiters get HANDED_OVER, never an outcome.
 */
import { isoTime } from '../../common/iso-time.js';
import type { Logger } from 'pino';
import { SubagentError, type SubagentResult } from '../../protocol/index.js';
import type { DaemonRun, ProviderStartRequest, RestoreContext } from '../provider.js';
import type { Lease, RunLedger, RunPatch, StoredRun } from '../store/run-ledger.js';
import type { ProviderRegistry } from './provider-registry.js';
import { OwnedRunHost } from './run-hosting.js';
import { DETACHED, type RunOwner } from './run-ownership.js';
import type { LiveRun } from './run-table.js';

/** What a continued child is told: it was stopped at a step boundary and its log is intact. */
const CONTINUE_PROMPT =
  'The service running you was restarted while you worked; your earlier steps are above. Continue the task from where you stopped.';

/** How the service publishes a continued run (under its old id and token, detached). */
export type PublishContinued = (stored: StoredRun, run: DaemonRun, host: OwnedRunHost, abort: AbortController, lease: Lease) => Promise<void>;

export class RunRecovery {
  constructor(
    private readonly ledger: RunLedger,
    private readonly registry: ProviderRegistry,
    private readonly log: Logger,
    private readonly maxOutputBytes: number,
  ) {}

  async markInterrupted(): Promise<StoredRun[]> {
    const interrupted: StoredRun[] = [];
    for (const run of await this.ledger.leftBehind()) {
      if (run.state !== 'running' && run.state !== 'starting') continue;
      const result: SubagentResult = {
        output: [],
        stopReason: 'error',
        diagnostic: `interrupted: the daemon that ran this child (pid ${run.worker.pid}) stopped before it settled; its session log is intact up to the last flushed turn`,
      };
      interrupted.push(await this.ledger.transition(run.runId, { state: 'settled', result, settledAt: isoTime() }, run.revision));
    }
    return interrupted;
  }

  async continueCheckpointed(publish: PublishContinued): Promise<string[]> {
    const continued: string[] = [];
    for (const stored of await this.ledger.leftBehind()) {
      if (stored.state !== 'checkpointed') continue;
      try {
        await this.continueRun(stored, publish);
        continued.push(stored.runId);
      } catch (error) {
        const diagnostic = `the checkpointed child could not be continued: ${error instanceof Error ? error.message : String(error)}`;
        this.log.error({ err: error, runId: stored.runId }, 'could not continue a checkpointed child');
        const current = (await this.ledger.get(stored.runId)) ?? stored;
        const failed: RunPatch = { state: 'settled', settledAt: isoTime(), result: { output: [], stopReason: 'error', diagnostic } };
        await this.ledger
          .transition(stored.runId, failed, current.revision)
          .catch((failure: unknown) => this.log.error({ err: failure, runId: stored.runId }, 'could not record the failed continuation'));
      }
    }
    return continued;
  }

  private async continueRun(stored: StoredRun, publish: PublishContinued): Promise<void> {
    const provider = this.registry.get(stored.provider);
    if (!provider?.restore) throw new Error(`provider "${stored.provider}" is not registered or cannot restore children`);
    const host = new OwnedRunHost(stored.runId, DETACHED, false, this.log, stored.provider, this.maxOutputBytes);
    const restored = await provider.restore(stored.id, { host, result: { output: [], stopReason: 'aborted' }, ...restoreHints(stored) });
    const abort = new AbortController();
    const lease = await this.ledger.admit(DETACHED.id, stored.provider, abort.signal);
    let run: DaemonRun;
    try {
      run = await restored.resume!([{ type: 'text', text: CONTINUE_PROMPT }], { signal: abort.signal });
    } catch (error) {
      lease.release();
      throw error;
    }
    await publish(stored, run, host, abort, lease);
    this.log.info({ runId: stored.runId }, 'continuing a checkpointed child');
  }

  /** Brings back the child of a run a previous daemon ran, hosted for `owner`. */
  async restore(record: LiveRun, owner: RunOwner, stream: boolean, report?: ProviderStartRequest['report']): Promise<void> {
    const provider = this.registry.get(record.provider);
    if (!provider?.restore) {
      throw new SubagentError('UNSUPPORTED_OPERATION', `run ${record.runId} was run by a previous daemon and provider "${record.provider}" cannot restore it`);
    }
    const host = new OwnedRunHost(record.runId, owner, stream, this.log, record.provider, this.maxOutputBytes);
    const stored = await this.ledger.get(record.runId);
    record.run = await provider.restore(record.id, {
      ...(report && { report }),
      host,
      result: record.result ?? { output: [], stopReason: 'error' },
      ...(stored && restoreHints(stored)),
    });
    record.host = host;
    this.log.info({ runId: record.runId, child: record.id }, 'restored a child from its session log');
  }

  /**
   * A drain's timeout: each child still running whose provider can restore it is checkpointed
   * (`record` writes the transition); the others are left to be cancelled.
   */
  checkpoint(running: readonly LiveRun[], record: (run: LiveRun, patch: RunPatch) => void): void {
    for (const run of running) {
      if (run.state !== 'running' || !this.registry.get(run.provider)?.restore) continue;
      run.checkpointed = true;
      record(run, { state: 'checkpointed' });
      this.log.info({ runId: run.runId }, 'drain timed out: child checkpointed for the next daemon');
    }
  }

  /** Whether a settled, undisposed child stays resumable by the next daemon after a drain. */
  keepsForNextDaemon(run: LiveRun): boolean {
    return run.state === 'settled' && !run.disposing && this.registry.get(run.provider)?.restore !== undefined;
  }
}

/** What a waiter on a checkpointed run learns: the truth, and where the outcome will be. */
export function handedOver(runId: string): SubagentError {
  return new SubagentError(
    'HANDED_OVER',
    `run ${runId} was handed to the next daemon, which continues it: re-attach (run/attach with its token) and wait on the next daemon`,
  );
}

function restoreHints(stored: StoredRun): Pick<RestoreContext, 'persona' | 'toolFilter' | 'maxDepth'> {
  const hints = stored.restore;
  return {
    ...(hints?.persona !== undefined && { persona: hints.persona }),
    ...(hints?.toolFilter && { toolFilter: hints.toolFilter }),
    ...(hints?.maxDepth !== undefined && { maxDepth: hints.maxDepth }),
  };
}
