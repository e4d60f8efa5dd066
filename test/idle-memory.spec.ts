/**
 * daemon/ops/idle-memory.ts in this process: the release shrinks V8's young generation back to
 * its minimum (what a plain full GC does not do), leaves no `gc` global behind, and the idle
 * watcher releases once per idle spell, only after the event loop has worked and only while
 * nothing is busy.
 */
import { getHeapSpaceStatistics } from 'node:v8';
import { afterEach, expect, it } from 'vitest';
import { releaseMemory, releaseMemoryWhenIdle, type Released } from '../daemon/ops/idle-memory.js';

const MiB = 1024 * 1024;
const newSpaceBytes = (): number => getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')!.space_size;

/** Short-lived garbage that survives a few scavenges: V8 grows the young generation for it. */
function churn(): void {
  let keep: object[] = [];
  for (let i = 0; i < 400_000; i++) {
    keep.push({ i, text: `item ${i}` });
    if (keep.length > 60_000) keep = [];
  }
}

/** Keeps the event loop busy for about `ms` (the watcher must see work). */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) churn();
}

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

it('shrinks the young generation that a burst of allocation grew, and exposes no gc global', () => {
  churn();
  const grown = newSpaceBytes();
  expect(grown).toBeGreaterThan(2 * MiB);
  const hadGc = typeof (globalThis as { gc?: unknown }).gc === 'function';
  const released = releaseMemory();
  expect(released).toBeDefined();
  expect(newSpaceBytes()).toBeLessThan(grown);
  expect(newSpaceBytes()).toBeLessThanOrEqual(2 * MiB);
  expect(released!.rssAfter).toBeGreaterThan(0);
  expect(typeof (globalThis as { gc?: unknown }).gc === 'function').toBe(hadGc);
});

/** Polls until `check` holds (bounded), for the watcher's own timer to act. */
async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

it('releases once after work followed by quiet, and not again while nothing happens', async () => {
  const releases: Released[] = [];
  stop = releaseMemoryWhenIdle({ quietMs: 0, onRelease: (released) => releases.push(released), checkEveryMs: 100 });
  // Quiet from the start: nothing to give back yet.
  await new Promise((resolve) => setTimeout(resolve, 350));
  expect(releases).toHaveLength(0);
  busy(150);
  await until(() => releases.length > 0);
  expect(releases).toHaveLength(1);
  // Its own collection is not work that calls for another one.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(releases).toHaveLength(1);
});

it('waits while the process says it is busy, and releases once it is not', async () => {
  const releases: Released[] = [];
  let checks = 0;
  let runsLive = true;
  stop = releaseMemoryWhenIdle({
    quietMs: 0,
    busy: () => {
      checks += 1;
      return runsLive;
    },
    onRelease: (released) => releases.push(released),
    checkEveryMs: 100,
  });
  busy(150);
  // Asked several times after the work, and refused each time.
  await until(() => checks >= 3);
  expect(checks).toBeGreaterThanOrEqual(3);
  expect(releases).toHaveLength(0);
  runsLive = false;
  await until(() => releases.length > 0);
  expect(releases).toHaveLength(1);
});
