/**
 * Keeps the daemon's event loop polling, instead of sleeping, for a short window after it hears
 * from a client or answers one: the client's next message in that window (a run's dispose after
 * its end, a harness's next start) is read at once, by a CPU that has not gone idle meanwhile.
 * Only what a client reacts to opens or extends a window: a read, a reply, a run's end. Run
 * events streamed to a client it does not answer, so they never keep the loop spinning.
 *
 * Why: a process that waits in epoll lets its CPU idle. On a virtual machine an idle vCPU halts,
 * and the host must wake it for the next message; the daemon's code then runs from caches other
 * work has used. Measured here (a Firecracker VM, 2 vCPUs; BENCHMARKS.md, wire rows b and n): a
 * start read by a daemon that slept waited ~30 µs for the wake-up, and its `service.start` took
 * 19 µs against 10 µs in a daemon that was still polling; start→ready fell from ~0.17 to ~0.11 ms.
 *
 * Cost: CPU, at most `windowMicros` per burst of traffic. A window that ends with nothing read is
 * a miss; after `MAX_MISSES` misses in a row the daemon no longer spins, but for one burst in
 * `PROBE_EVERY` (which tries again), so a client that talks now and then costs about
 * `windowMicros / PROBE_EVERY` per burst, and an idle daemon nothing. `pollSpinMicros: 0` in the
 * config turns it off.
 *
 * How: a chain of setImmediate callbacks. While an immediate is pending, libuv polls for I/O
 * without blocking, so sockets, timers and file callbacks are served as usual between the checks.
 */

/** Misses in a row after which the spin stays off (but for probes). */
export const MAX_MISSES = 2;
/** While off, one burst in this many spins anyway, to notice a client that became busy. */
export const PROBE_EVERY = 16;

export interface SpinCounts {
  /** Windows spun. */
  readonly windows: number;
  /** Of those, the ones in which a message was read. */
  readonly caught: number;
  /** Time spent spinning, in ms. */
  readonly spunMs: number;
}

export class PollSpin {
  private readonly windowMs: number;
  private until = 0;
  private startedAt = 0;
  private spinning = false;
  private heardInWindow = false;
  private misses = 0;
  private bursts = 0;
  private counts = { windows: 0, caught: 0, spunMs: 0 };

  constructor(
    windowMicros: number,
    private readonly now: () => number = () => performance.now(),
    private readonly later: (tick: () => void) => void = (tick) => void setImmediate(tick),
  ) {
    this.windowMs = windowMicros / 1000;
  }

  /** A message was read from a client. */
  readonly heard = (): void => {
    if (this.spinning) this.heardInWindow = true;
    this.active();
  };

  /** A reply or a run's end was queued for a client, which is likely to answer with its next request. */
  readonly answered = (): void => this.active();

  /** The totals, a window still spinning counted as far as it has gone. */
  get stats(): SpinCounts {
    if (!this.spinning) return { ...this.counts };
    const { windows, caught, spunMs } = this.counts;
    return { windows: windows + 1, caught: caught + (this.heardInWindow ? 1 : 0), spunMs: spunMs + (this.now() - this.startedAt) };
  }

  private active(): void {
    const now = this.now();
    if (this.spinning) {
      this.until = now + this.windowMs;
      return;
    }
    this.bursts += 1;
    if (this.misses >= MAX_MISSES && this.bursts % PROBE_EVERY !== 0) return;
    this.spinning = true;
    this.heardInWindow = false;
    this.startedAt = now;
    this.until = now + this.windowMs;
    this.later(this.tick);
  }

  private readonly tick = (): void => {
    const now = this.now();
    if (now < this.until) return this.later(this.tick);
    this.spinning = false;
    this.counts.windows += 1;
    this.counts.spunMs += now - this.startedAt;
    if (this.heardInWindow) this.counts.caught += 1;
    this.misses = this.heardInWindow ? 0 : this.misses + 1;
  };
}
