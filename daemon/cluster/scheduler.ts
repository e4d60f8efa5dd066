/**
 * Hands this member its next run: take a slot ticket from the shared queue (which holds the
 * cluster-wide cap), then claim a run for it by compare-and-set on the run's record.
 *
 * - A fresh ticket claims the queued run `pickFairly` chooses among those this member can run
 *   (`canRun`: the provider is registered here). Tickets are interchangeable: every submitted run
 *   adds one, so there are as many tickets as runs to execute, and a ticket is never tied to
 *   the run that brought it.
 * - A redelivered ticket (its holder went silent for ack_wait) first looks for the run that
 *   names it as its lease: that run's member is gone, and this member takes it over (running →
 *   running, new worker, attempt + 1). A run already settled only needs its ticket acknowledged.
 * - Losing a claim race (REVISION_CONFLICT) re-reads and picks again; a ticket with nothing this
 *   member can run goes back to the queue after a short delay, for another member.
 */
import { isoTime } from '../../common/iso-time.js';
import { SubagentError } from '../../protocol/index.js';
import type { ClusterRun, WorkerRef } from './cluster-run.js';
import { pickFairly } from './fair-pick.js';
import type { Revisioned, RunRecords } from './run-records.js';
import type { Lease, SlotQueue } from './slot-queue.js';

export interface Claim {
  readonly run: ClusterRun;
  readonly revision: number;
  readonly lease: Lease;
  /** The run was executing on a member that went silent: resume it, do not start it afresh. */
  readonly takeover: boolean;
  /** For a takeover: the member that went silent. */
  readonly previous?: WorkerRef;
}

/** How long a ticket with nothing to claim stays away before it is offered again. */
const GIVE_BACK_MS = 100;
/** Deliveries (each GIVE_BACK_MS apart at least) after which a ticket whose run has no record is dropped. */
const ORPHAN_DELIVERIES = 50;
/** How long one pull waits for a ticket before checking the abort signal again. */
const PULL_WAIT_MS = 1000;

export class ClusterScheduler {
  /** Queued and running runs: what a fair pick looks at (finished ones leave, so a pick stays cheap). */
  private readonly active = new Map<string, ClusterRun>();
  /** Each client's latest claim, settled runs included: the "longest ago served" of the fair pick. */
  private readonly lastServed = new Map<string, string>();
  /**
   * Queued runs one of this member's slot loops is claiming now: the other loops pick past them.
   * Without it every loop that holds a ticket picks the same fairest run, all but one lose the
   * compare-and-set, and the losers retry (or give their tickets back) — self-inflicted queueing.
   */
  private readonly claiming = new Set<string>();
  /** When this member first saw each queued run (its own clock): how long it has waited, as seen here. */
  private readonly queuedSeen = new Map<string, number>();

  constructor(
    readonly records: RunRecords<ClusterRun>,
    readonly queue: SlotQueue,
    readonly worker: WorkerRef,
  ) {
    for (const { record } of records.all()) this.observe(record);
    records.onChange((record) => this.observe(record));
  }

  private observe(run: ClusterRun): void {
    if (run.state === 'queued' || run.state === 'running') this.active.set(run.runId, run);
    else this.active.delete(run.runId);
    // Parked, or waiting for a member that serves its workspace: not waiting for the cap.
    if (run.state === 'queued' && run.parked === undefined && run.unserved === undefined) {
      if (!this.queuedSeen.has(run.runId)) this.queuedSeen.set(run.runId, performance.now());
    } else this.queuedSeen.delete(run.runId);
    if (run.claimedAt !== undefined && (this.lastServed.get(run.owner) ?? '') < run.claimedAt) this.lastServed.set(run.owner, run.claimedAt);
  }

  /**
   * Stores the run's record (queued) and its ticket at once: one round trip on the start's path,
   * not two. A member whose ticket arrives before the record reads the record (claimFor); a
   * ticket whose record could not be stored is taken back out of the queue.
   */
  async submit(run: ClusterRun): Promise<number> {
    const ticket = this.queue.enqueue(run.runId);
    ticket.catch(() => undefined); // awaited below; a rejection before then is not unhandled
    let revision: number;
    try {
      revision = (await this.records.create(run)).revision;
    } catch (error) {
      await ticket.then((seq) => this.queue.withdraw(seq), () => undefined).catch(() => undefined); // left behind, it is dropped as an orphan (claimFor)
      throw error;
    }
    await ticket;
    return revision;
  }

  /**
   * Puts a parked start (its record at `revision`) back in the queue as `run`, with a ticket of
   * its own (its first ticket was acknowledged when it was parked). The compare-and-set decides
   * between members adopting it at once; the ticket is enqueued only by the winner.
   */
  async requeue(run: ClusterRun, revision: number): Promise<number> {
    const next = await this.records.transition(run.runId, run, revision);
    await this.queue.enqueue(run.runId, `${run.runId}.${next}`);
    return next;
  }

  /**
   * The next run for this member, or undefined once `signal` aborts. `prepare` is awaited with
   * the runs a claim may look at before `canRun` (synchronous) judges them: the worker checks
   * their workspaces there (workspace.ts), once per identity.
   */
  async next(signal: AbortSignal, canRun: (run: ClusterRun) => boolean = () => true, prepare: Prepare = async () => undefined, slot?: SlotReservation): Promise<Claim | undefined> {
    while (!signal.aborted) {
      const lease = await this.queue.take(PULL_WAIT_MS).catch(() => undefined);
      if (!lease) continue;
      if (signal.aborted) {
        lease.nak();
        return undefined;
      }
      // The member's slots are full of local starts meanwhile (spare-tickets.ts): the ticket is for another member.
      if (slot && !slot.take()) {
        giveBack(lease);
        continue;
      }
      // The lease heartbeats from delivery: a claim that fails gives its ticket back, or it would be kept alive for nothing.
      const claim = await this.claimFor(lease, canRun, prepare).catch(() => giveBack(lease));
      if (claim) return claim;
      slot?.give();
    }
    return undefined;
  }

  /**
   * Whether a run waits in the queue as this member's view shows it, for `waitedMs` at least since
   * this member saw it queued; those this member is claiming aside, and those that wait for
   * something other than the cap (parked, or `unserved`: no live member serves their workspace).
   */
  hasQueued(waitedMs = 0): boolean {
    const before = performance.now() - waitedMs;
    for (const [runId, seenAt] of this.queuedSeen) if (seenAt <= before && !this.claiming.has(runId)) return true;
    return false;
  }

  private async claimFor(lease: Lease, canRun: (run: ClusterRun) => boolean, prepare: Prepare): Promise<Claim | undefined> {
    if (lease.runId !== undefined && (await this.surplus(lease.runId))) {
      await lease.ack();
      return undefined;
    }
    // A ticket whose run never got a record (its front failed between the two writes), offered long enough.
    if (lease.runId !== undefined && lease.deliveries > ORPHAN_DELIVERIES && (await this.records.refresh(lease.runId)) === undefined) {
      await lease.ack();
      return undefined;
    }
    if (lease.deliveries > 1) {
      const orphan = await this.orphanOf(lease);
      if (orphan === 'ended') {
        await lease.ack(); // its run ended; only its ticket was left behind
        return undefined;
      }
      if (orphan) {
        const current = orphan;
        await prepare([current.record]);
        if (!canRun(current.record)) return giveBack(lease);
        const run: ClusterRun = { ...current.record, worker: this.worker, attempt: current.record.attempt + 1, claimedAt: isoTime() };
        const revision = await this.records.transition(run.runId, run, current.revision).catch(() => undefined);
        if (revision === undefined) return giveBack(lease);
        return { run, revision, lease, takeover: true, ...(current.record.worker && { previous: current.record.worker }) };
      }
    }
    // A ticket can outrun its record to this member's view (the record's watch lags the queue): read it.
    if (lease.runId !== undefined && this.records.seen(lease.runId) === undefined) await this.records.refresh(lease.runId);
    await prepare(this.queued());
    for (let attempt = 0; attempt < 8; attempt++) {
      const picked = pickFairly(this.candidates(canRun), this.lastServed);
      if (!picked) break;
      const seen = this.records.seen(picked.runId)!;
      const { unserved: _waitedForAMember, ...queued } = picked;
      const run: ClusterRun = { ...queued, state: 'running', worker: this.worker, lease: lease.seq, attempt: 1, claimedAt: isoTime() };
      this.claiming.add(picked.runId);
      try {
        const revision = await this.records.transition(run.runId, run, seen.revision);
        return { run, revision, lease, takeover: false };
      } catch (error) {
        if (!(error instanceof SubagentError && error.code === 'REVISION_CONFLICT')) throw error;
        await this.records.refresh(picked.runId); // another member claimed it: the view learns so now, not at the watch's pace
      } finally {
        this.claiming.delete(picked.runId);
      }
    }
    return giveBack(lease);
  }

  private *queued(): Generator<ClusterRun> {
    for (const run of this.active.values()) if (run.state === 'queued' && run.parked === undefined) yield run;
  }

  /** Queued runs this member can run, plus every running one (fairness counts what executes). */
  private *candidates(canRun: (run: ClusterRun) => boolean): Generator<ClusterRun> {
    for (const run of this.active.values()) {
      // A run another loop here is claiming counts as running for its client: the fair pick moves on to the next client.
      if (this.claiming.has(run.runId)) yield { ...run, state: 'running' };
      else if (run.state === 'running' || (run.parked === undefined && canRun(run))) yield run; // a parked start waits for its client (parked-starts.ts)
    }
  }

  /** The ticket's own run was cancelled while queued (it ended unclaimed): one ticket too many. */
  private async surplus(runId: string): Promise<boolean> {
    const seen = this.records.seen(runId)?.record;
    if (!seen || seen.state === 'queued' || seen.state === 'running' || seen.lease !== undefined) return false;
    const current = (await this.records.get(runId))?.record;
    return current !== undefined && (current.state === 'settled' || current.state === 'disposed') && current.lease === undefined;
  }

  /**
   * The run a redelivered ticket was executing, as the server has it now: usually the ticket's
   * own run (asked of the server, so a view that lags cannot hide it), else one found in the view
   * naming the ticket (fair picks swap tickets; a recycled ticket, spare-tickets.ts, names the
   * local starts it served, one at a time). `ended`: the runs naming it all ended, so only the
   * ticket was left behind. A nested run names its parent's ticket too (lent-slots.ts): the ticket
   * is the parent's.
   */
  private async orphanOf(lease: Lease): Promise<Revisioned<ClusterRun> | 'ended' | undefined> {
    let ended = false;
    if (lease.runId !== undefined) {
      const own = await this.records.get(lease.runId);
      if (own?.record.lease === lease.seq) {
        if (own.record.state === 'running') return own;
        ended = true;
      }
    }
    // Every record, not only the active ones: a spare (its last run ended) of a member that died
    // comes back too, and is in excess (spares never go back to the queue), so it is acknowledged.
    const named: ClusterRun[] = [];
    for (const { record } of this.records.all()) {
      if (record.lease !== lease.seq || record.lentBy !== undefined || record.runId === lease.runId) continue;
      if (record.state === 'running') named.push(record);
      else ended = true;
    }
    for (const run of named) {
      const current = await this.records.get(run.runId);
      if (current?.record.state === 'running' && current.record.lease === lease.seq) return current;
      ended = true;
    }
    return ended ? 'ended' : undefined;
  }
}

export type Prepare = (runs: Iterable<ClusterRun>) => Promise<void>;

/** A member's execution slot for a claim: taken before it (false: none free), given back when no claim came of it. */
export interface SlotReservation {
  take(): boolean;
  give(): void;
}

function giveBack(lease: Lease): undefined {
  lease.nak(GIVE_BACK_MS);
  return undefined;
}
