/**
 * Local starts: a fresh start of this member's own client executes here at once, on a spare
 * ticket (spare-tickets.ts), instead of taking the ticket's trip through the queue. The rules of
 * those spares live here too: when one is used, kept or let go. The worker hands over the ticket
 * of each run that ends here (`recycle`) and executes what starts here (`LocalStartHost`).
 *
 * - The front creates the run's record, `running` (or already settled: answer-writes.ts), when it
 *   answers the start (cluster-ledger.ts). Until then the run is this member's alone: a start
 *   that fails or is abandoned first writes nothing (its front hears the failure directly), and
 *   the ticket goes on.
 *
 * Why it stays fair and does not hoard the cap:
 * - A spare is used for a local start only while no run has waited in the queue for 50 ms (as
 *   this member's view shows it); otherwise the start goes through the queue and the fair pick.
 * - While a run waits in the queue that long a member lets go of its spares, one every 50 ms,
 *   and of any spare after 1 s unused: the cap then has room for the queued runs' own tickets.
 * - Spares never go back to the queue: every queued run brought its own ticket, so the queue
 *   never holds a ticket in excess, and a spare is never the ticket a queued run waits for.
 */
import type { Logger } from 'pino';
import { isoTime } from '../../common/iso-time.js';
import type { ClusterRun } from './cluster-run.js';
import type { Claim, ClusterScheduler } from './scheduler.js';
import type { Lease } from './slot-queue.js';
import { SpareTickets } from './spare-tickets.js';

/** How long a spare ticket (spare-tickets.ts) waits for a local start before it is acknowledged. */
const SPARE_IDLE_MS = 1000;
/**
 * A queued run that waited this long (as this member saw it) may be waiting for the cap: local
 * starts yield to it, and spares are let go, one each time this passes. A run queued for less is
 * usually being claimed with its own ticket already (a busy front's own queued starts are).
 */
const RELEASE_AFTER_MS = 50;

/** What local starts need of their worker. */
export interface LocalStartHost {
  /** Aborted when the member stops: nothing starts here, and every ticket that ends is acknowledged. */
  readonly stopping: AbortSignal;
  /** Whether the member's link to NATS is up. */
  online(): boolean;
  /** Whether this member can execute the run now: its provider, and a yes for its workspace. */
  canRun(run: ClusterRun): boolean;
  /** Takes a free execution slot, promised to the start until it executes; false when none is free. */
  reserve(): boolean;
  /** Executes a claim on the slot reserved for it, beside the slot loops; `cancel` is its start's signal. */
  perform(claim: Claim, cancel: AbortSignal): Promise<void>;
  readonly log: Logger;
}

export class LocalStarts {
  /** Tickets of runs that ended here, kept for this member's next local start. */
  private readonly spares = new SpareTickets(SPARE_IDLE_MS, (lease) => this.recycle(lease, true));
  private releaseTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly scheduler: Pick<ClusterScheduler, 'worker' | 'hasQueued'>,
    private readonly host: LocalStartHost,
  ) {}

  /**
   * A fresh start of this member's own client that may execute here at once, on a spare ticket,
   * instead of waiting for the queue's trip: when this member has a free slot, the provider, a
   * yes for the workspace and a spare, and no run has waited in the queue for RELEASE_AFTER_MS
   * (the fair pick would put it first, if the cap is what it waits for). Returns the run's record,
   * `running` here under the spare, and `execute`, which creates it (one write: no ticket, no
   * claim) and starts the child beside the slot loops; undefined when the start must go through
   * the queue.
   */
  startHere(record: ClusterRun, cancel: AbortSignal): { record: ClusterRun; execute(): Promise<void> } | undefined {
    if (this.host.stopping.aborted || !this.host.online() || record.resumes !== undefined || record.pin !== undefined) return undefined;
    if (this.spares.size === 0 || !this.host.canRun(record) || this.scheduler.hasQueued(RELEASE_AFTER_MS) || !this.host.reserve()) return undefined;
    const lease = this.spares.take()!;
    const running: ClusterRun = { ...record, state: 'running', worker: this.scheduler.worker, lease: lease.seq, attempt: 1, claimedAt: isoTime(), local: true };
    return { record: running, execute: () => this.executeHere(running, lease, cancel) };
  }

  /** Starts the local start's child at once, with no record yet (revision 0): the execution takes the front's create's revision from the view. */
  private executeHere(record: ClusterRun, lease: Lease, cancel: AbortSignal): Promise<void> {
    void this.host.perform({ run: record, revision: 0, lease, takeover: false }, cancel).catch((error: unknown) =>
      this.host.log.warn({ err: error, runId: record.runId }, 'cluster: a local start failed'),
    );
    return Promise.resolve();
  }

  /**
   * The ticket of a run that ended here: kept as a spare; acknowledged once it goes unused
   * (`release`: its idle time is over, or a run waits in the queue). Never given back to the
   * queue: every queued run has a ticket of its own there, so the queue holds no ticket in excess,
   * and acknowledging a spare frees a unit of the cap for one of those.
   *
   * While a run has waited RELEASE_AFTER_MS, the ticket is acknowledged at once rather than kept:
   * it is what such a run waits for. Kept, with every start queued then (local starts wait too),
   * each queued start's ticket became a spare for its idle second, spares filled the cap, and the
   * pool ran at the pace spares were let go (three members: 140 runs/s, a fifth of its usual rate,
   * until the load stopped).
   */
  recycle(lease: Lease, release = false): void {
    if (release || this.host.stopping.aborted || this.scheduler.hasQueued(RELEASE_AFTER_MS)) {
      void lease.ack().catch(() => lease.stop()); // unconfirmed: it lapses, and its next holder finds nothing running under it
      return;
    }
    this.spares.keep(lease);
    if (this.scheduler.hasQueued()) this.releaseSoon();
  }

  /**
   * A record as this member's view shows it. A run waits in the queue for the cap (local starts
   * stop while it does; which runs wait for it is the scheduler's rule, `hasQueued`): if it still
   * waits a moment later, spares held here are let go, so that the cap has room for its own ticket.
   */
  seen(record: ClusterRun): void {
    if (record.state === 'queued' && this.scheduler.hasQueued()) this.releaseSoon();
  }

  /** Heartbeats every spare now (the link came back). */
  beat(): void {
    this.spares.beat();
  }

  /** The member stops: spares leave the queue (each queued run has a ticket of its own); their acknowledgements. */
  close(): Promise<void>[] {
    clearTimeout(this.releaseTimer);
    return this.spares.drain().map((lease) => lease.ack());
  }

  /**
   * While a run has waited in the queue for RELEASE_AFTER_MS, one spare is let go each time that
   * passes: it may wait for the cap, which this member's spares hold. (A run claimed sooner, as
   * queued starts usually are while the cap has room, costs no spare.)
   */
  private releaseSoon(): void {
    if (this.releaseTimer !== undefined || this.spares.size === 0) return;
    this.releaseTimer = setTimeout(() => {
      this.releaseTimer = undefined;
      if (this.scheduler.hasQueued(RELEASE_AFTER_MS)) {
        const spare = this.spares.take();
        if (spare) this.recycle(spare, true);
      }
      if (this.scheduler.hasQueued()) this.releaseSoon();
    }, RELEASE_AFTER_MS);
    this.releaseTimer.unref();
  }
}
