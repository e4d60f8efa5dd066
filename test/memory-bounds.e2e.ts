/**
 * The daemon's memory within the bound docs/security.md states: a real daemon process per case
 * (default limits, warmed by one run), a real ACP agent flooding output, and the kernel's own peak
 * (VmHWM over the process's whole life, nothing reset or sampled) against its idle VmRSS. The
 * bench's section "memory" measures the same cases (bench/memory-peaks.ts).
 */
import { expect, it } from 'vitest';
import { MEMORY_BOUND_MIB } from '../bench/memory.js';
import { floodPeak, mib } from '../bench/memory-peaks.js';

it(`50 MiB of child output streamed to a client: peak RSS at most +${MEMORY_BOUND_MIB} MiB over idle`, async () => {
  const m = await floodPeak(50);
  console.log(`[memory-bounds] ${m.scenario}: idle ${mib(m.idle)}, peak ${mib(m.peak)}, growth +${mib(m.peak - m.idle)}`);
  // The client got the run's stream up to the output cap: the flood did go through the daemon.
  expect(m.received).toBeGreaterThan(1024 * 1024);
  expect(m.peak - m.idle, `growth +${mib(m.peak - m.idle)}`).toBeLessThanOrEqual(MEMORY_BOUND_MIB * 1024 * 1024);
}, 120_000);
