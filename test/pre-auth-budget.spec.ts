/**
 * The pre-auth budget's rules: one peer past its own bound is evicted with a reason naming
 * `limits.preAuthBytes`; past the bound for all of them, the longest-waiting peers go first,
 * naming `limits.preAuthTotalBytes`; accepted or closed peers no longer count.
 */
import { describe, expect, it } from 'vitest';
import { PreAuthBudget, type PreAuthPeer } from '../daemon/connection/pre-auth-budget.js';

function peer(name: string, evicted: string[]): PreAuthPeer {
  return { evict: (reason) => void evicted.push(`${name}: ${reason}`) };
}

describe('PreAuthBudget', () => {
  it('evicts a peer that sends more than its own bound, and forgets its bytes', () => {
    const evicted: string[] = [];
    const budget = new PreAuthBudget(1000, 10_000);
    const a = peer('a', evicted);
    budget.add(a, 600);
    budget.add(a, 400);
    expect(evicted).toEqual([]);
    budget.add(a, 1);
    expect(evicted).toEqual(['a: sent 1001 bytes before initialize was accepted, over the 1000-byte limit (limits.preAuthBytes)']);
    expect(budget.heldBytes).toBe(0);
  });

  it('past the bound for all peers, closes the longest waiting first until under it', () => {
    const evicted: string[] = [];
    const budget = new PreAuthBudget(1000, 2500);
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => peer(n, evicted));
    budget.add(a!, 900);
    budget.add(b!, 900);
    budget.add(c!, 600);
    expect(evicted).toEqual([]);
    budget.add(d!, 900); // 3300 held: a (900) must go, leaving 2400
    expect(evicted.map((e) => e.slice(0, 1))).toEqual(['a']);
    expect(evicted[0]).toContain('(limits.preAuthTotalBytes)');
    expect(budget.heldBytes).toBe(2400);
  });

  it('an accepted peer stops counting', () => {
    const evicted: string[] = [];
    const budget = new PreAuthBudget(1000, 1500);
    const a = peer('a', evicted);
    const b = peer('b', evicted);
    budget.add(a, 900);
    budget.release(a);
    budget.add(b, 900);
    expect(evicted).toEqual([]);
    expect(budget.heldBytes).toBe(900);
  });
});
