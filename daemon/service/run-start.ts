/**
 * How a run starts, in its steps' order: the idempotency key (idempotency/start-keys.ts), the
 * checks (start-checks.ts), admission (RunLedger.admit) or a slot lent by the parent
 * (lineage-slots.ts), the provider's start, publication (run-lifecycle.ts), with the observers
 * (run-observer.ts) told at each step. A resumption goes the same way from admission on.
 *
 * Rules:
 * - Start checks run in the seam's order, before a slot is taken; a start cancelled before its
 *   child is ready is ABORTED, and a child ready too late is disposed, never published.
 * - A start's cancel rolls it back until publish accepts the run (its record written, no
 *   lifecycle event yet); from then on the run's cancel is its own.
 * - A start with an idempotency key is made once per parent session and key within the window;
 *   a repeat answers the same run, attached to the asking connection.
 * - A nested start belongs to its parent run's lineage: its slot, its token budget, and its
 *   `after-step` stop; a client's own start roots a new lineage, refused once the client's
 *   day's tokens are spent (BUDGET_EXCEEDED).
 * - A resumption is a new run of the same child, admitted like a start; a child runs one turn
 *   at a time.
 *
 * Failures: SHUTTING_DOWN, NO_PROVIDER, the checks' codes (start-checks.ts), ABORTED,
 * START_FAILED (a provider's failure that is no SubagentError, logged); a resume also RUN_STATE
 * or UNSUPPORTED_OPERATION.
 */
import type { Logger } from 'pino';
import { SubagentError, endEventOf, type AttachResult, type ContentBlock, type StartParams, type StartProgress, type StartResult } from '../../protocol/index.js';
import type { KeyedRun, StartKeyStore } from '../idempotency/start-keys.js';
import type { DaemonRun, IsolationRequest, ProviderStartRequest, RunHost } from '../provider.js';
import type { Lease, RunLedger } from '../store/run-ledger.js';
import type { TokenBudgets } from '../upstream/token-budgets.js';
import type { LineageSlots } from './lineage-slots.js';
import type { ProviderRegistry } from './provider-registry.js';
import { OwnedRunHost } from './run-hosting.js';
import type { RunLifecycle } from './run-lifecycle.js';
import type { RunObservers } from './run-observer.js';
import { mintRunId, mintToken, type MintedToken, type RunOwner, type StartAnswer } from './run-ownership.js';
import type { LiveRun, RunTable } from './run-table.js';
import { checkStartRequest, childDepth } from './start-checks.js';

export interface StartExtras {
  readonly parentRunId?: string;
  readonly report?: ProviderStartRequest['report'];
  /** How the run is handed to its owner, when that happens after start returns (a connection's reply). */
  readonly answer?: StartAnswer;
  /** Where the start stands until it is answered: queue position, provider start, ready. */
  readonly progress?: (value: StartProgress) => void;
  /** The caller's W3C trace context when the start params carry none (child/start, a face's `_meta`). */
  readonly traceparent?: string;
}

/** What a resume may carry besides its prompt: as StartExtras, for a continuation. */
export type ResumeExtras = Pick<StartExtras, 'report' | 'answer' | 'traceparent'>;

/** What a start needs of the service that composes it. */
export interface StartParts {
  readonly registry: ProviderRegistry;
  readonly ledger: RunLedger;
  readonly table: RunTable;
  readonly lifecycle: RunLifecycle;
  readonly lineageSlots: LineageSlots;
  /** Keyed starts of the last window. */
  readonly startKeys: StartKeyStore;
  readonly budgets: TokenBudgets | undefined;
  readonly log: Logger;
  readonly maxOutputBytes: number;
  /** Read at each start: the first observer may come later, and so may a shutdown. */
  observers(): RunObservers | undefined;
  shuttingDown(): boolean;
  /** The service's run/attach: how a repeated keyed start takes its run over. */
  attach(runId: string, runToken: string, owner: RunOwner, stream: boolean): Promise<AttachResult>;
}

export class RunStart {
  constructor(private readonly parts: StartParts) {}

  async start(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras): Promise<StartResult> {
    if (params.idempotencyKey === undefined) return this.afresh(params, owner, cancel, extras);
    const token = mintToken();
    const claimed = this.parts.startKeys.claim(params.parent.sessionId, params.idempotencyKey, mintRunId(), cancel, token.token);
    // This daemon's own store answers a new key at once: no turn of the event loop for it.
    const claim = claimed instanceof Promise ? await claimed : claimed;
    if ('run' in claim) return this.again(claim.run, owner, params.stream === true, extras.answer);
    try {
      const started = await this.afresh(params, owner, cancel, extras, claim.runId, token);
      claim.first({ runId: started.runId, runToken: started.runToken });
      return started;
    } catch (error) {
      claim.first(undefined);
      throw error;
    }
  }

  /**
   * A start repeated under its key: the run the first one made, attached to `owner` as by its
   * token. A run that settled meanwhile has its end notice sent again, after the answer: the
   * owner it had then may never have been told.
   */
  private async again(keyed: KeyedRun, owner: RunOwner, stream: boolean, answer: StartAnswer | undefined): Promise<StartResult> {
    const { result } = await this.parts.attach(keyed.runId, keyed.runToken, owner, stream);
    const record = this.parts.table.get(keyed.runId)!;
    const identity = { runId: record.runId, provider: record.provider, id: record.id, local: record.local };
    if (result) {
      const end = { ...endEventOf(identity, result), result };
      if (answer) answer.whenSent(identity.runId, () => owner.notifyEnd(end));
      else owner.notifyEnd(end);
    }
    return { ...identity, runToken: keyed.runToken };
  }

  private async afresh(params: StartParams, owner: RunOwner, cancel: AbortSignal, extras: StartExtras, runId = mintRunId(), token?: MintedToken): Promise<StartResult> {
    const { table, ledger, log } = this.parts;
    const { progress } = extras;
    if (this.parts.shuttingDown()) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    const provider = this.parts.registry.get(params.provider);
    if (!provider) {
      throw new SubagentError('NO_PROVIDER', `no provider named "${params.provider}" (have: ${this.parts.registry.list().join(', ') || 'none'})`, {
        field: '/provider',
      });
    }
    checkStartRequest(provider, params);
    const depth = childDepth(params.parent, params.maxDepth);
    const abort = new AbortController();
    // The start's cancel rolls it back until its answer is decided (publish's `accept`), never later.
    let answering = false;
    const onCancel = (): void => {
      if (!answering) abort.abort(new SubagentError('ABORTED', 'start was cancelled before the child was ready'));
    };
    if (cancel.aborted) onCancel();
    cancel.addEventListener('abort', onCancel, { once: true });
    const stopListening = (): void => cancel.removeEventListener('abort', onCancel);
    const host = new OwnedRunHost(runId, owner, params.stream === true, log, provider.name, this.parts.maxOutputBytes);
    const traceparent = params.traceparent ?? extras.traceparent;
    const observers = this.parts.observers();
    host.observers = observers;
    observers?.starting({
      runId,
      provider: provider.name,
      depth,
      connectionId: owner.id,
      ...(params.label !== undefined && { label: params.label }),
      ...(typeof params.agentOptions?.['model'] === 'string' && { model: params.agentOptions['model'] }),
      ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }),
      ...(owner.clientName !== undefined && { client: owner.clientName }),
      ...(traceparent !== undefined && { traceparent }),
    });
    // A nested start belongs to its parent run's lineage; a client's own start roots a new one.
    const parentRequester = extras.parentRunId !== undefined ? table.get(extras.parentRunId)?.host?.requester : undefined;
    host.requester = parentRequester ?? { client: owner.id, lineage: runId };
    const budgets = this.parts.budgets;
    if (budgets) {
      // A client's own start is refused once its day's tokens are spent; nested starts belong to a started lineage.
      if (parentRequester === undefined) budgets.checkStart(owner.clientName);
      host.tokenBudget = budgets.forRun(host.requester.lineage, owner.clientName);
    }
    table.starting.set(runId, { owner, abort });
    const told = startProgressTeller(host, extras.progress);
    let run: DaemonRun;
    let lease: Lease | undefined;
    try {
      ledger.assertRecordable(); // a run the ledger cannot hold would be lost at a restart
      const queuedAt = observers && monotonicMs();
      // A nested start runs on its parent's slot (lineage-slots.ts); a root start waits its fair turn.
      lease =
        extras.parentRunId !== undefined
          ? await this.parts.lineageSlots.borrow(extras.parentRunId, abort.signal)
          : await ledger.admit(owner.id, provider.name, abort.signal, told && ((position) => told({ kind: 'queued', position })));
      if (queuedAt !== undefined) observers?.admitted(runId, monotonicMs() - queuedAt);
      told?.({ kind: 'starting' });
      run = await provider.start({
        ...toProviderRequest(params, depth, abort.signal, host),
        ...(extras.report && { report: extras.report }),
        ...(told && { progress: told }),
        ...(traceparent !== undefined && { traceparent }),
        ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }),
      });
    } catch (error) {
      stopListening();
      lease?.release();
      const failure = this.failure(error, abort.signal, provider.name);
      observers?.startFailed(runId, failure.code);
      throw failure;
    } finally {
      table.starting.delete(runId);
    }
    if (abort.signal.aborted || !owner.open) {
      stopListening();
      // Ready too late: the caller already gave up, so the run is never published.
      await run.dispose().catch((error: unknown) => log.warn({ err: error, runId }, 'dispose after late readiness failed'));
      lease.release();
      observers?.startFailed(runId, 'ABORTED');
      throw new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    }
    const restore = {
      ...(params.persona !== undefined && { persona: params.persona }),
      ...(params.toolFilter && { toolFilter: params.toolFilter }),
      // The lineage's depth cap, for a restored child's nested delegation.
      ...(params.maxDepth !== undefined && { maxDepth: params.maxDepth }),
    };
    // A cancel read while the run's record is written still rolls the start back: publish asks
    // (after the write, before any lifecycle event) and from then on the run's cancel is its own.
    const accept = (): boolean => {
      answering = true;
      stopListening();
      return !abort.signal.aborted && owner.open;
    };
    let started: StartResult;
    try {
      started = await this.parts.lifecycle.publish(
        provider.name,
        run,
        owner,
        abort,
        host,
        lease,
        extras.answer,
        { restore, ...(extras.parentRunId !== undefined && { parentRunId: extras.parentRunId }), ...(token && { token }) },
        accept,
      );
    } catch (error) {
      if (error instanceof SubagentError && error.code === 'ABORTED') observers?.startFailed(runId, 'ABORTED');
      throw error;
    } finally {
      stopListening();
    }
    observers?.ready(started.runId, { id: started.id });
    // Started by a run already told to stop after its step: this one gets the same level.
    const parentRun = extras.parentRunId !== undefined ? table.get(extras.parentRunId) : undefined;
    const published = table.get(started.runId);
    if (parentRun?.stopsAfterStep && published?.state === 'running') table.stopAfterStep(published);
    progress?.({ kind: 'ready', runId: started.runId });
    return started;
  }

  private failure(error: unknown, signal: AbortSignal, provider: string): SubagentError {
    if (error instanceof SubagentError) return error;
    if (signal.aborted) return new SubagentError('ABORTED', 'start was cancelled before the child was ready');
    this.parts.log.warn({ err: error, provider }, 'provider failed to start a child');
    return new SubagentError('START_FAILED', `provider "${provider}" failed to start: ${error instanceof Error ? error.message : String(error)}`);
  }

  /**
   * Continue a settled child, owned by `owner` and in memory (restored first if only the ledger
   * had it), with `prompt` as a new run of it.
   */
  async resume(record: LiveRun, owner: RunOwner, prompt: ContentBlock[], stream: boolean, extras: ResumeExtras): Promise<StartResult> {
    const { answer, traceparent } = extras;
    const { table, ledger } = this.parts;
    if (!record.run) throw new SubagentError('RUN_STATE', `run ${record.runId} has no live child`);
    const resume = record.run.resume;
    if (!resume) throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${record.provider}" does not support resume`);
    if (this.parts.shuttingDown()) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down and accepts no new runs');
    if (record.state !== 'settled') throw new SubagentError('RUN_STATE', `run ${record.runId} is ${record.state}; only a settled run can be resumed`);
    const host = record.host!;
    // One turn at a time per child: re-arming the host of a chain whose later run still works
    // would hold that run's settle for an answer that never comes.
    for (const other of table.values()) {
      if (other.host === host && other.state === 'running') throw new SubagentError('RUN_STATE', `child ${record.id} is already running a continuation (run ${other.runId})`);
    }
    const abort = new AbortController();
    const lease = await ledger.admit(owner.id, record.provider, abort.signal);
    // The provider keeps the chain's first host for its whole life: point it at the new run
    // before the child can emit anything for it.
    host.rearm(mintRunId(), owner, stream);
    const observers = (host.observers = this.parts.observers());
    observers?.starting({
      runId: host.runId,
      provider: record.provider,
      depth: 1,
      connectionId: owner.id,
      resumedFrom: record.runId,
      ...(record.parentRunId !== undefined && { parentRunId: record.parentRunId }),
      ...(owner.clientName !== undefined && { client: owner.clientName }),
      ...(traceparent !== undefined && { traceparent }),
    });
    let next: DaemonRun;
    try {
      next = await resume.call(record.run, prompt, { signal: abort.signal, ...(traceparent !== undefined && { traceparent }) });
    } catch (error) {
      lease.release();
      observers?.startFailed(host.runId, error instanceof SubagentError ? error.code : 'START_FAILED');
      throw error;
    }
    const restore = (await ledger.get(record.runId))?.restore;
    const started = await this.parts.lifecycle.publish(record.provider, next, owner, abort, host, lease, answer, { resumedFrom: record.runId, ...(restore && { restore }) });
    observers?.ready(started.runId, { id: started.id });
    return started;
  }
}

function toProviderRequest(params: StartParams, depth: number, signal: AbortSignal, host: RunHost): ProviderStartRequest {
  const isolation = isolationOf(params);
  return {
    prompt: params.prompt,
    parent: params.parent,
    childDepth: depth,
    signal,
    host,
    ...(params.agentOptions !== undefined && { agentOptions: params.agentOptions }),
    ...(params.outputSchema !== undefined && { outputSchema: params.outputSchema }),
    ...(params.maxDepth !== undefined && { maxDepth: params.maxDepth }),
    ...(params.toolFilter !== undefined && { toolFilter: params.toolFilter }),
    ...(params.persona !== undefined && { persona: params.persona }),
    ...(params.tools !== undefined && { tools: params.tools }),
    ...(params.env !== undefined && { env: params.env }),
    ...(params.label !== undefined && { label: params.label }),
    ...(isolation && { isolation }),
  };
}

/** The start's worktree isolation fields, when it has any. */
function isolationOf(params: StartParams): IsolationRequest | undefined {
  if (params.isolation === undefined && params.baseRef === undefined && params.includeUncommitted === undefined && params.cleanup === undefined) return undefined;
  return {
    ...(params.isolation !== undefined && { isolation: params.isolation }),
    ...(params.baseRef !== undefined && { baseRef: params.baseRef }),
    ...(params.includeUncommitted !== undefined && { includeUncommitted: params.includeUncommitted }),
    ...(params.cleanup !== undefined && { cleanup: params.cleanup }),
  };
}

/** Not `performance.now()`: that global loads node:perf_hooks at start (ops/idle-memory.ts). */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * Where a start stands, told twice: as the start's `$/progress` (when it gave a token) and as the
 * run's own `queued`/`agent-starting` events (when it streams), which the host holds until the
 * answer that names the run and then sends first, in order. Undefined when nobody listens.
 */
function startProgressTeller(host: OwnedRunHost, progress: StartExtras['progress']): StartExtras['progress'] {
  if (!host.stream) return progress;
  return (value) => {
    progress?.(value);
    if (value.kind === 'queued') host.emit({ kind: 'queued', position: value.position });
    else if (value.kind === 'agent') host.emit({ kind: 'agent-starting', stage: value.stage });
  };
}
