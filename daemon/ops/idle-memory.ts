/**
 * Giving memory back when the daemon is idle. V8 sizes the young generation for the busiest
 * moment it has seen (start-up's module loading grows it to several MiB) and keeps it; its own
 * memory reducer shrinks it only after about 8 s of quiet, and not at all when the last thing
 * before the quiet allocated a lot. A "last resort" full GC (the one V8 runs before giving up on
 * an allocation) compacts the old generation and shrinks the young one to its minimum.
 *
 * Rules:
 * - `releaseMemory` runs one such GC now, synchronously: V8 repeats full GCs until nothing more is
 *   freed, about 40 ms of CPU on an idle daemon's heap (a plain full GC is ~17 ms and returns nothing).
 *   It needs V8's `gc` function: the one `--expose-gc` installed, else one taken from a fresh
 *   context with the flag on for that moment only, so no code of ours or a provider's sees it.
 * - `releaseMemoryWhenIdle` runs it once per idle spell: when the event loop has done work since
 *   the last release, then stayed idle for `quietMs`, and nothing is `busy` (a daemon with live
 *   runs leaves it to V8's own memory reducer: its heap may be large, and a run waiting on its
 *   model is not idle). Idleness is measured, not inferred: the CPU time the process used since
 *   the last check (`process.cpuUsage`: the event loop, and the GC and file-system threads working
 *   for it), so the hot path reports nothing for it. The check is an unref'd timer (every 1 s).
 *   Neither it nor the timings need `node:perf_hooks`, which would cost an idle daemon ≈ 0.1 MiB.
 * - Its cost stays bounded: after a release of T ms the next waits at least 100 × T, so releases
 *   take at most 1% of the time whatever the clients' rhythm.
 * Failures: none thrown. Where no `gc` can be had (a runtime without the flag), nothing is
 * released and V8's own memory reducer still runs later.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options?: { type?: 'major' | 'minor'; execution?: 'sync' | 'async'; flavor?: 'regular' | 'last-resort' }) => void;

/** CPU time (ms) in one check interval above which the process counts as working. */
const ACTIVE_MS_PER_CHECK = 5;
/** A release's share of the time at most (the wait after one is its duration times this). */
const SPACING_PER_RELEASE_MS = 100;

let gc: Gc | undefined;

/** Monotonic milliseconds. */
const now = (): number => Number(process.hrtime.bigint()) / 1e6;

/** CPU milliseconds (user + system) the process used since `since`. */
const cpuMsSince = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

function collector(): Gc | undefined {
  if (gc) return gc;
  const exposed = (globalThis as { gc?: Gc }).gc;
  if (typeof exposed === 'function') return (gc = exposed);
  try {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as Gc;
  } catch {
    gc = undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  return gc;
}

export interface Released {
  /** RSS before and after, bytes. */
  readonly rssBefore: number;
  readonly rssAfter: number;
  /** Wall time of the collection, ms. */
  readonly ms: number;
}

/** One compacting, young-generation-shrinking GC now; undefined when no `gc` is available. */
export function releaseMemory(): Released | undefined {
  const collect = collector();
  if (!collect) return undefined;
  const rssBefore = process.memoryUsage.rss();
  const started = now();
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return { rssBefore, rssAfter: process.memoryUsage.rss(), ms: now() - started };
}

export interface IdleReleaseOptions {
  /** Quiet time after work before a release. */
  readonly quietMs: number;
  /** True while something keeps the process from being idle (the daemon: live runs). */
  readonly busy?: () => boolean;
  /** Hears each release (the daemon logs it at debug level). */
  readonly onRelease?: (released: Released) => void;
  readonly checkEveryMs?: number;
}

/** Releases memory once the event loop has been idle for `quietMs` after doing work; returns the stop function. */
export function releaseMemoryWhenIdle(options: IdleReleaseOptions): () => void {
  const { quietMs, busy = () => false, onRelease = () => {}, checkEveryMs = 1000 } = options;
  let worked = false;
  let quietSince = now();
  let notBefore = 0;
  let last = process.cpuUsage();
  const timer = setInterval(() => {
    const at = now();
    const spent = cpuMsSince(last);
    last = process.cpuUsage();
    if (spent > ACTIVE_MS_PER_CHECK) {
      worked = true;
      quietSince = at;
      return;
    }
    if (!worked || at - quietSince < quietMs || at < notBefore || busy()) return;
    worked = false;
    const released = releaseMemory();
    // The collection itself is work of the process: not a reason for another one.
    last = process.cpuUsage();
    if (!released) return;
    notBefore = now() + released.ms * SPACING_PER_RELEASE_MS;
    onRelease(released);
  }, checkEveryMs);
  timer.unref();
  return () => clearInterval(timer);
}
