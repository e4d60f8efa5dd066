/**
 * Continuable children: a child that keeps its session and takes follow-up messages, owned by a
 * client's owner key and a parent session rather than by a connection, so it outlives both the
 * connection and the daemon. Each turn is an ordinary run of the SubagentService (admission,
 * `runs`, inspect, restore all apply); this module chains the turns:
 *
 * - start resolves once the first message is accepted (the child's first turn is running);
 * - a message to a running child waits FIFO in its durable inbox and becomes its next turn; an
 *   idle child is woken; a child a previous daemon ran is taken back with its recorded run token
 *   and restored from its session log (NOT_RESUMABLE when its provider or log cannot);
 * - when a turn ends with an empty inbox the child is idle and its parent gets one settlement
 *   notice (`child/settled`); an owner with no connection gets it when it next attaches;
 * - an interrupted turn parks the inbox: the child goes idle, its parent hears it was stopped, and
 *   the queued messages wait for the next `child/send` (which runs them first, in order);
 * - a `report` the child makes before its start has returned (in its first step) is held until the
 *   child is recorded, then relayed.
 *
 * Authority is in lineage.ts. Failures: unknown child → NOT_RESUMABLE on send, no-op on interrupt.
 */
import { isoTime } from '../../common/iso-time.js';
import { createHash, randomBytes } from '../../common/node-builtins.js';
import type { Logger } from 'pino';
import {
  SubagentError,
  type ChildListing,
  type ChildMessageResult,
  type ChildReportParams,
  type ChildSettledNotice,
  type ChildSettledParams,
  type ChildStartParams,
  type ContentBlock,
  type InterruptLevel,
  type PermissionParams,
  type PermissionResult,
  type SubagentResult,
  worktreeNote,
} from '../../protocol/index.js';
import { ChildIndex, type ChildRecord, type QueuedMessage } from '../store/child-index.js';
import { checkInterrupter, checkSender, listLineage } from './lineage.js';
import type { RunOwner, SubagentService } from './subagent-service.js';

/** A client connection that receives the settlement notices of an owner key's children. */
export interface ChildSubscriber {
  readonly open: boolean;
  notifyChildSettled(params: ChildSettledParams): void;
  notifyChildReport(params: ChildReportParams): void;
  askPermission(params: PermissionParams, signal: AbortSignal): Promise<PermissionResult>;
}

export const hashOwnerKey = (key: string): string => createHash('sha256').update(key).digest('hex');
/** Reports one child may make before its start returns; more are a runaway, and dropped. */
const MAX_EARLY_REPORTS = 64;
const mintMessageId = (): string => `msg_${randomBytes(12).toString('base64url')}`;

/** The settlement notice's wording: how the turn ended, then the child's closing message. */
export function settledNotice(childId: string, label: string | undefined, result: SubagentResult, parentId: string): ChildSettledParams {
  const name = label ?? `child ${childId}`;
  const verbs: Record<string, string> = { completed: 'finished', aborted: 'was stopped before it finished', 'max-tokens': 'ran out of room', refusal: 'declined' };
  const verb = verbs[result.stopReason] ?? `failed (${result.stopReason}${result.diagnostic ? `: ${result.diagnostic}` : ''})`;
  const closing = result.output.map((block) => (block.type === 'text' ? block.text : '')).join('');
  const text = `${name} ${verb}. ${closing ? `Its closing message:\n${closing}` : 'It left no closing message.'}${worktreeNote(result)}`;
  return { childId, parentId, ...(label !== undefined && { label }), stopReason: result.stopReason, text };
}

export class ContinuableChildren {
  private readonly owners = new Map<string, RunOwner>();
  private readonly subscribers = new Map<string, Set<ChildSubscriber>>();
  private readonly reportSink = (childId: string, output: string, mode: ChildReportParams['mode']): void => this.relayReport(childId, output, mode);
  /** Turns (by run id) an interrupt stopped: their end parks the inbox instead of running it. */
  private readonly interrupted = new Set<string>();
  /** Starts not yet recorded, and the reports their children made meanwhile (by child id). */
  private startsInFlight = 0;
  private readonly earlyReports = new Map<string, Array<{ output: string; mode: ChildReportParams['mode'] }>>();

  constructor(
    private readonly service: SubagentService,
    private readonly index: ChildIndex,
    private readonly log: Logger,
  ) {}

  /** Take back the turns a checkpointing daemon handed to this one, so their ends are seen. */
  async adoptLiveTurns(): Promise<void> {
    for (const record of this.index.all()) {
      try {
        const { run } = await this.service.attach(record.runId, record.runToken, this.ownerFor(record.ownerHash));
        if (run.state === 'running') {
          this.index.update(record.childId, { status: 'running' });
          this.watch(record.childId, record.runId);
        }
      } catch {
        // Not in the run index any more: the next message finds out (NOT_RESUMABLE).
      }
    }
  }

  async start(params: ChildStartParams, subscriber: ChildSubscriber, cancel: AbortSignal): Promise<ChildMessageResult> {
    const ownerHash = this.attachSubscriber(params.ownerKey, subscriber);
    const provider = this.service.registry.get(params.provider);
    if (provider && !provider.runtime.resume) {
      throw new SubagentError('UNSUPPORTED_OPERATION', `provider "${provider.name}" cannot continue a child (no resume)`, { field: '/provider' });
    }
    const { ownerKey: _key, ...start } = params;
    const label = params.label;
    this.startsInFlight += 1;
    let started;
    try {
      started = await this.service.start(start, this.ownerFor(ownerHash), cancel, { report: this.reportSink });
    } catch (error) {
      this.endStart(undefined);
      throw error;
    }
    const messageId = mintMessageId();
    this.index.put({
      childId: started.id,
      ownerHash,
      parentId: params.parent.sessionId,
      provider: started.provider,
      ...(label !== undefined && { label }),
      runId: started.runId,
      runToken: started.runToken,
      status: 'running',
      messageId,
      inbox: [],
      undelivered: [],
      createdAt: isoTime(),
    });
    this.endStart(started.id);
    this.watch(started.id, started.runId);
    return { childId: started.id, messageId };
  }

  async send(ownerKey: string, childId: string, from: string, message: ContentBlock[], subscriber: ChildSubscriber, traceparent?: string): Promise<ChildMessageResult> {
    const ownerHash = this.attachSubscriber(ownerKey, subscriber);
    const record = this.index.get(childId);
    if (!record) throw new SubagentError('NOT_RESUMABLE', `no child ${childId} is recorded: it cannot be resumed`, { field: '/childId' });
    checkSender(record, ownerHash, from);
    const queued: QueuedMessage = { messageId: mintMessageId(), content: structuredClone(message), ...(traceparent !== undefined && { traceparent }) };
    if (record.status === 'running') {
      this.index.update(childId, { inbox: [...record.inbox, queued] });
      return { childId, messageId: queued.messageId };
    }
    // Idle: messages a stopped daemon left queued go first, this one after them.
    const [next, ...rest] = [...record.inbox, queued];
    await this.wake(record, next!, rest);
    return { childId, messageId: queued.messageId };
  }

  /** Settled or absent targets are no-ops; the inbox is kept, parked until the next `child/send`. */
  interrupt(ownerKey: string, childId: string, by: string, level: InterruptLevel, subscriber: ChildSubscriber): void {
    const ownerHash = this.attachSubscriber(ownerKey, subscriber);
    const record = this.index.get(childId);
    if (!record) return;
    checkInterrupter(this.index, record, ownerHash, by);
    if (record.status !== 'running') return;
    this.interrupted.add(record.runId);
    this.service.cancel(record.runId, this.ownerFor(ownerHash), level).catch((error: unknown) => {
      this.interrupted.delete(record.runId);
      // The turn is already over (or is being handed back by a restart): nothing runs to stop.
      this.log.debug({ err: error, childId }, 'interrupt found no running turn');
    });
  }

  list(ownerKey: string, of: string, scope: 'children' | 'descendants', subscriber: ChildSubscriber): ChildListing {
    const ownerHash = this.attachSubscriber(ownerKey, subscriber);
    return { entries: listLineage(this.index, ownerHash, of, scope), diagnostics: [...this.index.unreadable] };
  }

  /** Subscribe a connection to an owner's notices and send it the ones that waited. */
  attach(ownerKey: string, subscriber: ChildSubscriber): number {
    const ownerHash = this.attachSubscriber(ownerKey, subscriber);
    let delivered = 0;
    for (const record of this.index.all()) {
      if (record.ownerHash !== ownerHash || record.undelivered.length === 0) continue;
      for (const notice of record.undelivered) subscriber.notifyChildSettled({ ...notice, parentId: record.parentId });
      delivered += record.undelivered.length;
      this.index.update(record.childId, { undelivered: [] });
    }
    return delivered;
  }

  close(): void {
    this.index.close();
  }

  private attachSubscriber(ownerKey: string, subscriber: ChildSubscriber): string {
    const ownerHash = hashOwnerKey(ownerKey);
    const set = this.subscribers.get(ownerHash) ?? new Set();
    set.add(subscriber);
    this.subscribers.set(ownerHash, set);
    return ownerHash;
  }

  private openSubscribers(ownerHash: string): ChildSubscriber[] {
    const set = this.subscribers.get(ownerHash);
    if (!set) return [];
    for (const subscriber of set) if (!subscriber.open) set.delete(subscriber);
    return [...set];
  }

  /**
   * The run owner of one owner key's turns. It never goes away (children outlive connections),
   * hosts no client tools, and asks permission of whichever of the owner's connections is open.
   */
  private ownerFor(ownerHash: string): RunOwner {
    let owner = this.owners.get(ownerHash);
    if (!owner) {
      owner = {
        id: `children:${ownerHash.slice(0, 12)}`,
        open: true,
        durable: true,
        notifyStart: () => undefined,
        notifyEnd: () => undefined,
        notifyRunEvent: () => undefined,
        callTool: () => Promise.reject(new Error('continuable children have no client-hosted tools')),
        askPermission: (params, signal) => {
          const [subscriber] = this.openSubscribers(ownerHash);
          return subscriber ? subscriber.askPermission(params, signal) : Promise.resolve({ outcome: 'cancelled' });
        },
      };
      this.owners.set(ownerHash, owner);
    }
    return owner;
  }

  /** Run `content` as the child's next turn: the same session, continued (restored first if need be). */
  private async wake(record: ChildRecord, message: QueuedMessage, inbox: ChildRecord['inbox']): Promise<void> {
    const content = message.content;
    this.index.update(record.childId, { status: 'running', messageId: message.messageId, inbox });
    const owner = this.ownerFor(record.ownerHash);
    let started;
    try {
      // After a restart the run is known only from the index: its token takes it back.
      await this.service.attach(record.runId, record.runToken, owner);
      started = await this.service.resume(record.runId, owner, content, false, {
        report: this.reportSink,
        ...(message.traceparent !== undefined && { traceparent: message.traceparent }),
      });
    } catch (error) {
      this.index.update(record.childId, { status: 'idle' });
      throw notResumable(record, error);
    }
    this.index.update(record.childId, { runId: started.runId, runToken: started.runToken });
    this.watch(record.childId, started.runId);
  }

  private watch(childId: string, runId: string): void {
    const owner = this.ownerFor(this.index.get(childId)!.ownerHash);
    this.service.wait(runId, owner).then(
      (result) => this.turnEnded(childId, runId, result),
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        return this.turnEnded(childId, runId, { output: [], stopReason: 'error', diagnostic: `infrastructure fault: ${message}` });
      },
    );
  }

  private async turnEnded(childId: string, runId: string, result: SubagentResult): Promise<void> {
    const parked = this.interrupted.delete(runId);
    const record = this.index.get(childId);
    // A shutting-down daemon's turns end here too: the next daemon takes them over.
    if (!record || record.runId !== runId || this.service.isShuttingDown) return;
    const [next, ...rest] = parked ? [] : record.inbox;
    if (next) {
      try {
        await this.wake(record, next, rest);
        return;
      } catch (error) {
        this.log.warn({ err: error, childId }, 'could not run a queued message');
        result = { output: [], stopReason: 'error', diagnostic: (error as Error).message };
      }
    }
    const idle = this.index.update(childId, { status: 'idle' });
    this.deliver(idle, { ...settledNotice(childId, idle.label, result, idle.parentId), ...(idle.messageId !== undefined && { messageId: idle.messageId }) });
  }

  /** A start has returned (`childId` recorded) or failed (undefined): relay what its child reported early. */
  private endStart(childId: string | undefined): void {
    this.startsInFlight -= 1;
    const early = childId === undefined ? undefined : this.earlyReports.get(childId);
    if (childId !== undefined) this.earlyReports.delete(childId);
    // No start left that could claim the rest: they belonged to starts that failed.
    if (this.startsInFlight === 0) this.earlyReports.clear();
    for (const { output, mode } of early ?? []) this.relayReport(childId!, output, mode);
  }

  /** A child's `report`: to the owner's open connections now; a report nobody is there for is dropped. */
  private relayReport(childId: string, output: string, mode: ChildReportParams['mode']): void {
    const record = this.index.get(childId);
    if (!record) {
      // Made in the child's first step, before its start returned: held until it is recorded.
      const held = this.earlyReports.get(childId) ?? [];
      if (this.startsInFlight > 0 && held.length < MAX_EARLY_REPORTS) this.earlyReports.set(childId, [...held, { output, mode }]);
      return;
    }
    const report: ChildReportParams = { childId, parentId: record.parentId, ...(record.label !== undefined && { label: record.label }), output, mode };
    const subscribers = this.openSubscribers(record.ownerHash);
    if (subscribers.length === 0) this.log.info({ childId }, 'a child reported while its owner had no connection: report dropped');
    for (const subscriber of subscribers) subscriber.notifyChildReport(report);
  }

  private deliver(record: ChildRecord, notice: ChildSettledParams): void {
    const subscribers = this.openSubscribers(record.ownerHash);
    if (subscribers.length === 0) {
      const { parentId: _parentId, ...stored }: ChildSettledNotice & { parentId: string } = notice;
      this.index.update(record.childId, { undelivered: [...record.undelivered, stored] });
      return;
    }
    for (const subscriber of subscribers) subscriber.notifyChildSettled(notice);
  }
}

/**
 * Why a wake failed, as the caller should hear it: a busy or stopping daemon says so; anything else
 * (no restore, a log past retention, a disposed run, an unknown run) means the child cannot come back.
 */
function notResumable(record: ChildRecord, error: unknown): SubagentError {
  if (error instanceof SubagentError && ['SHUTTING_DOWN', 'OVERLOADED', 'ABORTED'].includes(error.code)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new SubagentError('NOT_RESUMABLE', `child ${record.childId} cannot be resumed from its record: ${message}`, { field: '/childId' });
}
