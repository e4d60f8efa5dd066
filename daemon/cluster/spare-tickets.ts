/**
 * Slot tickets a member keeps after their run ended here, so that its front's next start can
 * execute at once, here, without the ticket's trip through the queue (the *local start*,
 * cluster-worker.ts `startHere`): its record is created `running` (settled, for a child done by
 * then: answer-writes.ts), this member as `worker`, the spare's stream sequence as `lease`. A
 * spare is still an unacknowledged ticket: it counts against the cluster-wide cap (the `slots`
 * consumer's `max_ack_pending`) and is heartbeated like every lease, so a run holding one is
 * taken over after its member's death exactly like a claimed one (scheduler.ts finds it by that
 * sequence).
 *
 * Why it stays fair and does not hoard the cap (the rules live in cluster-worker.ts; this class
 * only holds the tickets):
 * - A spare is used for a local start only while no run has waited in the queue for 50 ms (as
 *   this member's view shows it); otherwise the start goes through the queue and the fair pick.
 * - While a run waits in the queue that long a member lets go of its spares, one every 50 ms,
 *   and of any spare after `idleMs` unused: the cap then has room for the queued runs' own tickets.
 * - Spares never go back to the queue: every queued run brought its own ticket, so the queue
 *   never holds a ticket in excess, and a spare is never the ticket a queued run waits for.
 */
import type { Lease } from './slot-queue.js';

interface Spare {
  readonly lease: Lease;
  readonly timer: NodeJS.Timeout;
}

export class SpareTickets {
  private readonly spares: Spare[] = [];

  constructor(
    private readonly idleMs: number,
    /** A spare unused for `idleMs`: acknowledge it. */
    private readonly expire: (lease: Lease) => void,
  ) {}

  get size(): number {
    return this.spares.length;
  }

  /** Keeps `lease` (heartbeated, as from its delivery) until `take`, its expiry or its lapse. */
  keep(lease: Lease): void {
    const timer = setTimeout(() => {
      if (this.remove(lease)) this.expire(lease);
    }, this.idleMs);
    timer.unref();
    this.spares.push({ lease, timer });
    // A lapsed spare (no heartbeat confirmed: NATS away) is no longer ours to use (one that
    // lapsed already is dropped at once).
    lease.keepAlive(() => void this.remove(lease));
  }

  /** The most recently kept spare (its lease has the most recent heartbeat), or undefined. */
  take(): Lease | undefined {
    const spare = this.spares.pop();
    if (!spare) return undefined;
    clearTimeout(spare.timer);
    return spare.lease;
  }

  /** Heartbeats every spare now (the link came back). */
  beat(): void {
    for (const { lease } of this.spares) lease.beat();
  }

  /** Removes and returns every spare. */
  drain(): Lease[] {
    const all = this.spares.splice(0);
    for (const spare of all) clearTimeout(spare.timer);
    return all.map((spare) => spare.lease);
  }

  private remove(lease: Lease): boolean {
    const at = this.spares.findIndex((spare) => spare.lease === lease);
    if (at < 0) return false;
    clearTimeout(this.spares[at]!.timer);
    this.spares.splice(at, 1);
    return true;
  }
}
