/**
 * daemon/ops/idle-memory.ts in this process: the release shrinks V8's young generation back to
 * its minimum (what a plain full GC does not do), leaves no `gc` global behind, and the idle
 * watcher releases once per idle spell, only after the event loop has worked.
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

it('releases once after work followed by quiet, and not again while nothing happens', async () => {
  const releases: Released[] = [];
  stop = releaseMemoryWhenIdle(0, (released) => releases.push(released), 100);
  // Quiet from the start: nothing to give back yet.
  await new Promise((resolve) => setTimeout(resolve, 350));
  expect(releases).toHaveLength(0);
  busy(150);
  const deadline = performance.now() + 10_000;
  while (releases.length === 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  expect(releases).toHaveLength(1);
  // Its own collection is not work that calls for another one.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(releases).toHaveLength(1);
});
