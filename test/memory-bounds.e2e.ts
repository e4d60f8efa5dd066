/**
 * The daemon's memory within the bound docs/security.md states, in both of its cases (a flood to
 * a streaming client; 5 clients that never read): a real daemon process per case
 * (default limits, warmed by one run), real ACP agents flooding output, and the kernel's own peak
 * (VmHWM over the process's whole life, nothing reset or sampled) against its idle VmRSS. The
 * bench's section "memory" measures the same cases (bench/memory-peaks.ts).
 */
import { expect, it } from 'vitest';
import { MEMORY_BOUND_MIB } from '../bench/memory.js';
import { floodPeak, mib, nonReadersPeak } from '../bench/memory-peaks.js';

it(`50 MiB of child output streamed to a client: peak RSS at most +${MEMORY_BOUND_MIB} MiB over idle`, async () => {
  const m = await floodPeak(50);
  console.log(`[memory-bounds] ${m.scenario}: idle ${mib(m.idle)}, peak ${mib(m.peak)}, growth +${mib(m.peak - m.idle)}`);
  // The client got the run's stream up to the output cap: the flood did go through the daemon.
  expect(m.received).toBeGreaterThan(1024 * 1024);
  expect(m.peak - m.idle, `growth +${mib(m.peak - m.idle)}`).toBeLessThanOrEqual(MEMORY_BOUND_MIB * 1024 * 1024);
}, 120_000);

it(`5 clients that never read, each streaming a run whose agent replies with 20 MiB: peak RSS at most +${MEMORY_BOUND_MIB} MiB over idle`, async () => {
  const m = await nonReadersPeak(5, 20);
  console.log(`[memory-bounds] ${m.scenario}: idle ${mib(m.idle)}, peak ${mib(m.peak)}, growth +${mib(m.peak - m.idle)}`);
  // Nothing was read: what the runs streamed and their ends waited in the daemon until the runs ended.
  expect(m.received).toBeLessThan(64 * 1024);
  expect(m.peak - m.idle, `growth +${mib(m.peak - m.idle)}`).toBeLessThanOrEqual(MEMORY_BOUND_MIB * 1024 * 1024);
}, 180_000);
