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
 *   model is not idle). Idleness is measured, not inferred: the event loop's own utilisation
 *   (`performance.eventLoopUtilization`), so the hot path reports nothing for it. The check is an
 *   unref'd timer (every 1 s).
 * - Its cost stays bounded: after a release of T ms the next waits at least 100 × T, so releases
 *   take at most 1% of the time whatever the clients' rhythm.
 * Failures: none thrown. Where no `gc` can be had (a runtime without the flag), nothing is
 * released and V8's own memory reducer still runs later.
 */
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options?: { type?: 'major' | 'minor'; execution?: 'sync' | 'async'; flavor?: 'regular' | 'last-resort' }) => void;

/** Event-loop time (ms) in one check interval above which the process counts as working. */
const ACTIVE_MS_PER_CHECK = 5;
/** A release's share of the time at most (the wait after one is its duration times this). */
const SPACING_PER_RELEASE_MS = 100;

let gc: Gc | undefined;

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
  const started = performance.now();
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return { rssBefore, rssAfter: process.memoryUsage.rss(), ms: performance.now() - started };
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
  let quietSince = performance.now();
  let notBefore = 0;
  let last = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.now();
    const spent = performance.eventLoopUtilization(last);
    last = performance.eventLoopUtilization();
    if (spent.active > ACTIVE_MS_PER_CHECK) {
      worked = true;
      quietSince = now;
      return;
    }
    if (!worked || now - quietSince < quietMs || now < notBefore || busy()) return;
    worked = false;
    const released = releaseMemory();
    // The collection itself is work of the loop: not a reason for another one.
    last = performance.eventLoopUtilization();
    if (!released) return;
    notBefore = performance.now() + released.ms * SPACING_PER_RELEASE_MS;
    onRelease(released);
  }, checkEveryMs);
  timer.unref();
  return () => clearInterval(timer);
}
