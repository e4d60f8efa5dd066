/**
 * Slot tickets a member keeps after their run ended here, so that its front's next start can
 * execute at once, here, without the ticket's trip through the queue (the *local start*,
 * local-starts.ts `startHere`): its record is created `running` (settled, for a child done by
 * then: answer-writes.ts), this member as `worker`, the spare's stream sequence as `lease`. A
 * spare is still an unacknowledged ticket: it counts against the cluster-wide cap (the `slots`
 * consumer's `max_ack_pending`) and is heartbeated like every lease, so a run holding one is
 * taken over after its member's death exactly like a claimed one (scheduler.ts finds it by that
 * sequence).
 *
 * This class only holds the tickets: when a spare is used, kept or let go, so that spares stay
 * fair and never hoard the cap, are local-starts.ts's rules.
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
