import { describe, expect, it } from 'vitest';
import { MAX_MISSES, PollSpin, PROBE_EVERY } from '../daemon/connection/poll-spin.js';

/** A PollSpin on a clock the test moves, whose scheduled ticks the test runs one at a time. */
function harness(windowMicros = 250) {
  let clock = 0;
  const ticks: Array<() => void> = [];
  const spin = new PollSpin(
    windowMicros,
    () => clock,
    (tick) => ticks.push(tick),
  );
  return {
    spin,
    /** Moves the clock by `ms` and runs the one pending tick, if any. */
    step(ms: number): void {
      clock += ms;
      ticks.shift()?.();
    },
    get pending(): number {
      return ticks.length;
    },
    /** Steps until the spin has stopped scheduling ticks. */
    runOut(ms = 0.05): void {
      while (ticks.length > 0) this.step(ms);
    },
  };
}

describe('PollSpin: polling for a moment after talking to a client', () => {
  it('keeps the loop busy only for its window after the last message, then lets it sleep', () => {
    const h = harness(250);
    h.spin.heard();
    expect(h.pending).toBe(1);
    h.step(0.1);
    h.step(0.1);
    expect(h.pending).toBe(1); // 0.2 ms in: still inside the 0.25 ms window
    h.step(0.1);
    expect(h.pending).toBe(0); // past it: no tick scheduled, the loop may sleep
    expect(h.spin.stats.windows).toBe(1);
    expect(h.spin.stats.spunMs).toBeCloseTo(0.3, 5);
  });

  it('extends the window on every message read or answered while it spins, and counts a read in it as caught', () => {
    const h = harness(250);
    h.spin.answered();
    h.step(0.2);
    h.spin.heard(); // the next request arrives while polling
    h.step(0.2);
    expect(h.pending).toBe(1); // 0.4 ms in, but only 0.2 ms after the read
    h.runOut();
    expect(h.spin.stats).toMatchObject({ windows: 1, caught: 1 });
  });

  it(`stops spinning after ${MAX_MISSES} windows in a row with nothing read, but for one burst in ${PROBE_EVERY}`, () => {
    const h = harness(250);
    for (let i = 0; i < MAX_MISSES; i++) {
      h.spin.heard(); // a lone request: its window ends with nothing more read
      h.runOut();
    }
    expect(h.spin.stats).toMatchObject({ windows: MAX_MISSES, caught: 0 });
    let spun = 0;
    for (let burst = 0; burst < PROBE_EVERY * 3; burst++) {
      h.spin.heard();
      if (h.pending > 0) spun += 1;
      h.runOut();
    }
    expect(spun).toBe(3); // the probes alone
    expect(h.spin.stats.windows).toBe(MAX_MISSES + 3);
  });

  it('spins again for good once a probe catches a busy client', () => {
    const h = harness(250);
    for (let i = 0; i < MAX_MISSES; i++) {
      h.spin.heard();
      h.runOut();
    }
    // Bursts until the next probe spins.
    while (h.pending === 0) h.spin.heard();
    h.step(0.1);
    h.spin.heard(); // caught: the client talks within the window
    h.runOut();
    h.spin.heard();
    expect(h.pending).toBe(1); // no longer held off
  });

  it('counts a window still spinning in its totals (what the daemon logs when it stops mid-burst)', () => {
    const h = harness(250);
    h.spin.answered();
    h.step(0.1);
    h.spin.heard();
    expect(h.spin.stats).toMatchObject({ windows: 1, caught: 1 });
    expect(h.spin.stats.spunMs).toBeCloseTo(0.1, 5);
  });

  it('reads no clock and schedules nothing while idle', () => {
    let reads = 0;
    const scheduled: Array<() => void> = [];
    new PollSpin(
      250,
      () => (reads += 1),
      (tick) => scheduled.push(tick),
    );
    expect(reads).toBe(0);
    expect(scheduled).toHaveLength(0);
  });
});
