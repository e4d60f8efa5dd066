/**
 * Pulls slot tickets for a member's slot loops in batches: one pull request asks for as many
 * tickets as loops wait (the server delivers them as they come, until the request's expiry), so
 * a busy member sends one pull per several runs instead of one per run, and a ticket arriving
 * finds a pull already waiting at the server.
 *
 * - A loop's `take` gets a ticket held here at once, else waits (up to its `waitMs`) for the next
 *   one delivered. A ticket delivered after its loop stopped waiting is held (and heartbeated, as
 *   every lease is from delivery) for the next `take`.
 * - A new pull is sent when none is outstanding, or once the loops waiting beyond what is asked
 *   for are a quarter of them: while a pull is outstanding, every ticket the server has goes to
 *   it, so holding back the small top-ups costs no waiting ticket anything.
 * - A pull ends at its batch, at a status from the server (408: expired, 409: refused) or, if
 *   neither came (a lost connection), a few seconds after its expiry; what it did not deliver is
 *   asked for again.
 * - Each pull has its own reply subject: tickets arrive under the queue's subject, so only the
 *   subscription tells which pull they fill. (Pulls are raw `$JS.API.CONSUMER.MSG.NEXT`: the 3.x
 *   client's `fetch` needs expiry >= 1 s and one request per batch.)
 */
import { createInbox, nanos, type Msg } from '@nats-io/transport-node';
import type { NatsLink } from './nats-link.js';

/** How long one pull waits at the server for tickets. */
const PULL_EXPIRES_MS = 1000;
/** After its expiry, how long a pull with no status from the server is still counted as asked for. */
const PULL_GRACE_MS = 4000;

interface Taker {
  give(msg: Msg | undefined): void;
}

export class TicketPuller<T> {
  private readonly takers: Taker[] = [];
  private readonly held: T[] = [];
  /** Tickets asked of the server and not delivered yet (outstanding pulls' remaining batches). */
  private requested = 0;
  private closed = false;
  private pumping = false;

  constructor(
    private readonly link: NatsLink,
    /** `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` */
    private readonly api: string,
    /** Makes a delivered ticket a lease (it heartbeats from here). */
    private readonly lease: (msg: Msg) => T,
  ) {}

  /** The next ticket, waiting up to `waitMs`, or undefined. */
  take(waitMs: number): Promise<T | undefined> {
    const held = this.held.shift();
    if (held !== undefined) return Promise.resolve(held);
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const taker: Taker = {
        give: (msg) => {
          clearTimeout(timer);
          resolve(msg && this.lease(msg));
        },
      };
      const timer = setTimeout(() => {
        const at = this.takers.indexOf(taker);
        if (at >= 0) this.takers.splice(at, 1);
        resolve(undefined);
      }, waitMs);
      this.takers.push(taker);
      this.pump();
    });
  }

  /** Stops pulling; the held tickets are handed to `release` (given back), waiting takes get none. */
  close(release: (ticket: T) => void): void {
    this.closed = true;
    for (const taker of this.takers.splice(0)) taker.give(undefined);
    for (const ticket of this.held.splice(0)) release(ticket);
  }

  /** Asks once the current burst is over: loops that start (or come back) together share one pull. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    queueMicrotask(() => {
      this.pumping = false;
      this.ask();
    });
  }

  private ask(): void {
    if (this.closed || !this.link.online) return;
    const want = this.takers.length - this.requested;
    if (want <= 0) return;
    if (this.requested > 0 && want < Math.ceil(this.takers.length / 4)) return;
    this.pull(want);
  }

  private pull(batch: number): void {
    const { nc } = this.link;
    const inbox = createInbox();
    let left = batch;
    const end = (): void => {
      if (left < 0) return;
      this.requested -= left;
      left = -1;
      clearTimeout(guard);
      sub.unsubscribe();
      this.pump();
    };
    const sub = nc.subscribe(inbox, {
      callback: (error, msg) => {
        // A status (404, 408 expired, 409 refused) or a closed subscription: the pull is over.
        if (error || msg.headers?.hasError || msg.headers?.code || !msg.reply) return end();
        // A ticket after the pull was counted out (its end guessed, the link back): still ours to run.
        if (left > 0) {
          left -= 1;
          this.requested -= 1;
        }
        this.deliver(msg);
        if (left === 0) end();
      },
    });
    const guard = setTimeout(end, PULL_EXPIRES_MS + PULL_GRACE_MS);
    guard.unref();
    this.requested += batch;
    try {
      nc.publish(this.api, JSON.stringify({ batch, expires: nanos(PULL_EXPIRES_MS) }), { reply: inbox });
    } catch {
      end(); // closed meanwhile
    }
  }

  private deliver(msg: Msg): void {
    const taker = this.takers.shift();
    if (taker) taker.give(msg);
    else this.held.push(this.lease(msg));
  }
}
