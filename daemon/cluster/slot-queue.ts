/**
 * The cluster's admission queue: a JetStream work-queue stream of slot tickets, one per admitted
 * run, and one durable pull consumer shared by every member. The consumer's `max_ack_pending`
 * is the cluster-wide cap: the server hands out at most that many unacknowledged tickets, so at
 * most that many runs execute at once across all members. A ticket is a lease: its holder
 * heartbeats it (`+WPI`, JetStream's "working") every ack_wait/3 from the moment it is delivered
 * (the claim that follows can wait seconds on a busy KV) and acknowledges it when the run ends; a holder that dies stops heartbeating, and after ack_wait the server redelivers the
 * ticket to another member (which then takes the run over, see scheduler.ts).
 *
 * Tickets are pulled in batches, as many as the member's slot loops wait for (ticket-puller.ts).
 *
 * Rules and failures:
 * - `open` creates the stream and consumer, or updates the consumer's cap and ack_wait to this
 *   member's config (all members of a pool must agree; the last to start wins).
 * - A lease knows when it has lapsed: a heartbeat counts only once a round trip to the server
 *   confirmed it (flush), and `onLapse` fires, on its own timer, when the last confirmed one is
 *   older than ack_wait minus half a heartbeat period: before the server can hand the ticket to
 *   anyone else, unless this process's event loop stalls for longer than that margin.
 */
import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { nanos, type Msg } from '@nats-io/transport-node';
import { TicketPuller } from './ticket-puller.js';
import { withoutStacks, type NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';

export interface SlotQueueOptions {
  /** Runs executing at once across the cluster (limits.maxConcurrentRuns). */
  readonly cap: number;
  /** The lease: how long a silent holder keeps its ticket (default 15 s). */
  readonly ackWaitMs: number;
}

export const DEFAULT_ACK_WAIT_MS = 15_000;

export class SlotQueue {
  private readonly puller: TicketPuller<Lease>;

  private constructor(
    private readonly link: NatsLink,
    private readonly names: ClusterNames,
    readonly options: SlotQueueOptions,
  ) {
    const api = `$JS.API.CONSUMER.MSG.NEXT.${names.queueStream}.${names.slotsConsumer}`;
    this.puller = new TicketPuller(link, api, (msg) => new Lease(link, msg, options.ackWaitMs));
  }

  static async open(link: NatsLink, names: ClusterNames, options: SlotQueueOptions): Promise<SlotQueue> {
    await ensureQueue(link.jsm, names, options);
    return new SlotQueue(link, names, options);
  }

  /**
   * Puts one ticket in the queue; `dedupId` (default the run id) de-duplicates a retried publish.
   * A run's second ticket (an adopted parked start) needs an id of its own, or the server's
   * duplicate window would swallow it.
   */
  async enqueue(runId: string, dedupId = runId): Promise<number> {
    const ack = await withoutStacks(() => this.link.js.publish(this.names.queueSubject, JSON.stringify({ runId }), { msgID: dedupId }));
    return ack.seq;
  }

  /** Takes a ticket back out of the queue (its run could not be recorded). */
  async withdraw(seq: number): Promise<void> {
    await this.link.jsm.streams.deleteMessage(this.names.queueStream, seq, false);
  }

  /**
   * The next ticket, waiting up to `waitMs`, or undefined. The server gives none while `cap`
   * tickets are out, which is what makes the cap hold.
   */
  take(waitMs: number): Promise<Lease | undefined> {
    return this.puller.take(waitMs);
  }

  /** Stops pulling; tickets delivered but not taken yet go back to the queue at once. */
  close(): void {
    this.puller.close((lease) => lease.nak());
  }

  /** Tickets out and waiting, as the server counts them (for status and tests). */
  async depth(): Promise<{ leased: number; waiting: number }> {
    const info = await this.link.jsm.consumers.info(this.names.queueStream, this.names.slotsConsumer);
    return { leased: info.num_ack_pending, waiting: info.num_pending };
  }
}

async function ensureQueue(jsm: JetStreamManager, names: ClusterNames, options: SlotQueueOptions): Promise<void> {
  try {
    await jsm.streams.info(names.queueStream);
  } catch {
    await jsm.streams
      .add({
        name: names.queueStream,
        subjects: [names.queueSubject],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: nanos(120_000),
      })
      .catch(async (error: unknown) => {
        // Another member created it between our look and our add.
        await jsm.streams.info(names.queueStream).catch(() => Promise.reject(error));
      });
  }
  const config = {
    durable_name: names.slotsConsumer,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(options.ackWaitMs),
    max_ack_pending: options.cap,
    max_deliver: -1,
    max_waiting: 4096,
  };
  try {
    await jsm.consumers.info(names.queueStream, names.slotsConsumer);
    await jsm.consumers.update(names.queueStream, names.slotsConsumer, { ack_wait: config.ack_wait, max_ack_pending: config.max_ack_pending });
  } catch {
    await jsm.consumers.add(names.queueStream, config).catch(async (error: unknown) => {
      await jsm.consumers.info(names.queueStream, names.slotsConsumer).catch(() => Promise.reject(error));
    });
  }
}

/** `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>` (and a v2 form with domain and hash). */
function parseAckSubject(reply: string): { deliveries: number; seq: number } {
  const parts = reply.split('.');
  const at = parts.length >= 12 ? 4 : 0; // v2 subjects carry domain and account hash first
  return { deliveries: Number(parts[at + 4]), seq: Number(parts[at + 5]) };
}

/** What an execution needs of its ticket: a lease of its own (Lease), or one it only names (NamedTicket). */
export type Ticket = Pick<Lease, 'seq' | 'heartbeatMs' | 'keepAlive' | 'beat' | 'ack' | 'stop'>;

/**
 * A ticket an execution names but does not hold: its parent's, lent to a nested run
 * (lent-slots.ts), or its own once its run settled and the ticket went on as a spare
 * (spare-tickets.ts). Heartbeats, acknowledgement and lapse are the holder's business.
 */
export class NamedTicket implements Ticket {
  constructor(
    readonly seq: number,
    readonly heartbeatMs: number,
  ) {}

  keepAlive(): void {}

  beat(): void {}

  ack(): Promise<void> {
    return Promise.resolve();
  }

  stop(): void {}
}

export class Lease {
  /** The ticket's stream sequence: the same across redeliveries, so a run can name its lease. */
  readonly seq: number;
  /** 1 for a fresh ticket; more when the server redelivered it (its holder went silent). */
  readonly deliveries: number;
  readonly runId: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lapseTimer: NodeJS.Timeout | undefined;
  private confirmedAt: number;
  private done = false;
  /** No heartbeat was confirmed in time: the server may hand the ticket to another member now. */
  private lapsed = false;
  private onLapse: (() => void) | undefined;
  /** Re-arms the lapse timer after a confirmed heartbeat (set by keepAlive). */
  private rearm: (() => void) | undefined;

  constructor(
    private readonly link: NatsLink,
    private readonly msg: Msg,
    readonly ackWaitMs: number,
  ) {
    const { deliveries, seq } = parseAckSubject(msg.reply!);
    this.seq = seq;
    this.deliveries = deliveries;
    // The server started the lease at delivery, a network hop before this; the margin covers it.
    this.confirmedAt = Date.now();
    try {
      this.runId = (msg.json() as { runId?: string }).runId;
    } catch {
      this.runId = undefined;
    }
    this.start();
  }

  get heartbeatMs(): number {
    return Math.max(50, Math.floor(this.ackWaitMs / 3));
  }

  /**
   * Heartbeats every ack_wait/3 from delivery until ack, nak or stop: the claim that follows a
   * delivery (picking a run, a compare-and-set on its record) can take seconds while the pool's
   * KV is busy, and the server's lease runs all that time. The lapse timer runs from delivery
   * too: it fires when no heartbeat was confirmed for ack_wait minus half a period.
   */
  private start(): void {
    // Its own timer, re-armed at each confirmed heartbeat: the lapse is noticed on time, not at the next tick.
    const armLapse = (): void => {
      clearTimeout(this.lapseTimer);
      const due = this.confirmedAt + this.ackWaitMs - this.heartbeatMs / 2 - Date.now();
      this.lapseTimer = setTimeout(() => {
        if (this.done) return;
        this.stop();
        this.lapsed = true;
        this.onLapse?.();
      }, Math.max(0, due));
      this.lapseTimer.unref();
    };
    this.rearm = armLapse;
    const tick = (): void => {
      if (this.done) return;
      this.beat();
      this.timer = setTimeout(tick, this.heartbeatMs);
      this.timer.unref();
    };
    armLapse();
    this.timer = setTimeout(tick, this.heartbeatMs);
    this.timer.unref();
  }

  /**
   * `onLapse` fires once when the lease is lost (no heartbeat confirmed in time): stop the work
   * now. A lease that lapsed already (during the claim) calls it at once.
   */
  keepAlive(onLapse: () => void): void {
    if (this.lapsed) {
      onLapse();
      return;
    }
    this.onLapse = onLapse;
  }

  /**
   * One heartbeat now, counted once the server confirmed it (also sent at once when the link comes
   * back after an outage: the server may have restarted, and its lease clock with it).
   */
  beat(): void {
    if (this.done) return;
    const sentAt = Date.now();
    try {
      this.msg.respond('+WPI');
      this.link.nc.flush().then(
        () => {
          if (this.done || sentAt <= this.confirmedAt) return;
          this.confirmedAt = sentAt;
          this.rearm?.();
        },
        () => undefined,
      );
    } catch {
      // offline: the lapse timer runs on
    }
  }

  /**
   * The run is over: the ticket leaves the queue (confirmed by the server). Until the server
   * confirms, the lease is kept alive: an ack that fails (NATS away) can be tried again.
   */
  async ack(): Promise<void> {
    await withoutStacks(() => this.link.nc.request(this.msg.reply!, '+ACK', { timeout: 5000 }));
    this.stop();
  }

  /** Give the ticket back for someone else (or this member) after `delayMs`. */
  nak(delayMs = 0): void {
    this.stop();
    this.msg.respond(delayMs > 0 ? `-NAK ${JSON.stringify({ delay: nanos(delayMs) })}` : '-NAK');
  }

  /** Stop heartbeating without answering: the server redelivers after ack_wait. */
  stop(): void {
    this.done = true;
    clearTimeout(this.timer);
    clearTimeout(this.lapseTimer);
  }
}
