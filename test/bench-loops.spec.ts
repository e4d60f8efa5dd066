import { describe, expect, it } from 'vitest';
import { alternating } from '../bench/loops.js';

describe('bench alternating(): configurations take turns run by run', () => {
  it('warms each up as a block, then alternates A B C, C B A within each round, with per-round medians of its own samples', async () => {
    const calls: string[] = [];
    const config = (name: string, value: number, warmup: number) => ({
      name,
      bounds: { warmup, max: 4, budgetMs: 60_000 },
      once: async () => {
        calls.push(name);
        return [value + calls.filter((c) => c === name).length];
      },
    });
    const results = await alternating([config('a', 100, 1), config('b', 200, 2), config('c', 300, 0)], 2);
    // Warm-ups first (a once, b twice), then 2 rounds of 2 turns each: forward, then reverse.
    expect(calls.join(' ')).toBe('a b b a b c c b a a b c c b a');
    expect(results.get('a')!.count).toBe(4);
    expect(results.get('c')!.count).toBe(4);
    // a's measured values: 102 103 (round 1), 104 105 (round 2): the medians (nearest-rank, stats.ts) are its own, round by round.
    expect(results.get('a')!.roundMedians.map(([m]) => m)).toEqual([102, 104]);
    expect(results.get('c')!.samples[0]).toEqual([301, 302, 303, 304]);
  });
});
