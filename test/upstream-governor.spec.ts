/**
 * The endpoint governor on its own: fair order across clients then lineages, the adaptive limit
 * and the endpoint-wide pause of a push-back, explicit per-minute limits, cancel while waiting.
 */
import { describe, expect, it } from 'vitest';
import { FairQueue } from '../daemon/upstream/fair-queue.js';
import { EndpointGovernor, INITIAL_LIMIT, type Permit } from '../daemon/upstream/governor.js';
import { endpointIdentity } from '../daemon/upstream/endpoint-identity.js';
import { Upstream } from '../daemon/upstream/upstream.js';

const never = new AbortController().signal;
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('FairQueue', () => {
  it('serves clients round robin, then lineages within a client, FIFO within a lineage', () => {
    const queue = new FairQueue<string>();
    for (let i = 1; i <= 3; i++) queue.push('A', 'a1', `A-a1-${i}`);
    queue.push('A', 'a2', 'A-a2-1');
    queue.push('B', 'b1', 'B-b1-1');
    queue.push('B', 'b1', 'B-b1-2');
    const order: string[] = [];
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) order.push(item);
    expect(order).toEqual(['A-a1-1', 'B-b1-1', 'A-a2-1', 'B-b1-2', 'A-a1-2', 'A-a1-3']);
    expect(queue.size).toBe(0);
  });

  it('removes a waiting item and forgets emptied clients', () => {
    const queue = new FairQueue<string>();
    queue.push('A', 'x', 'one');
    queue.push('B', 'y', 'two');
    expect(queue.remove('A', 'x', 'one')).toBe(true);
    expect(queue.remove('A', 'x', 'one')).toBe(false);
    expect(queue.shift()).toBe('two');
    expect(queue.size).toBe(0);
  });
});

describe('EndpointGovernor', () => {
  it('never lets more than maxConcurrent through and hands permits out in fair order', async () => {
    const governor = new EndpointGovernor('http://x', { maxConcurrent: 2 });
    const granted: string[] = [];
    const permits: Permit[] = [];
    const take = (client: string, n: number): void =>
      void governor.acquire({ client, lineage: `${client}-root` }, never).then((permit) => {
        granted.push(`${client}${n}`);
        permits.push(permit);
      });
    for (let i = 1; i <= 4; i++) take('A', i);
    for (let i = 1; i <= 2; i++) take('B', i);
    await tick();
    expect(granted).toEqual(['A1', 'A2']);
    expect(governor.status()).toMatchObject({ inFlight: 2, waiting: 4, limit: 2 });
    while (permits.length > 0) {
      permits.shift()!.release({ kind: 'ok', tokens: 10 });
      await tick();
    }
    // After the two that went at once: B was served before A's third, alternating.
    expect(granted).toEqual(['A1', 'A2', 'A3', 'B1', 'A4', 'B2']);
    expect(governor.status()).toMatchObject({ inFlight: 0, waiting: 0, tokensPerMinute: 60, requestsPerMinute: 6 });
  });

  it('a push-back cuts the limit to what the provider was serving and pauses the whole endpoint for Retry-After', async () => {
    const governor = new EndpointGovernor('http://x');
    const who = { client: 'c', lineage: 'l' };
    const first = await Promise.all(Array.from({ length: INITIAL_LIMIT }, () => governor.acquire(who, never)));
    // Three responses are streaming when the fourth request is refused.
    for (const permit of first.slice(1)) permit.streaming();
    first[0]!.release({ kind: 'throttled', retryAfterMs: 300 });
    const status = governor.status();
    expect(status.throttledLastMinute).toBe(1);
    expect(status.pausedUntil).toBeDefined();
    // Room under the new limit, yet nobody goes while the endpoint is paused.
    first[1]!.release({ kind: 'ok' });
    let granted = false;
    const waiting = governor.acquire(who, never).then((permit) => {
      granted = true;
      return permit;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(granted).toBe(false);
    const late = await waiting;
    expect(granted).toBe(true);
    // The cut, applied when the pause ended: to the three being served.
    expect(governor.status().limit).toBe(3);
    late.release({ kind: 'ok' });
    for (const permit of first.slice(2)) permit.release({ kind: 'ok' });
  });

  it('push-backs of one round cut once; successes grow the limit only up to the cut for a while', async () => {
    const governor = new EndpointGovernor('http://x', {});
    const who = { client: 'c', lineage: 'l' };
    const permits = await Promise.all(Array.from({ length: 4 }, () => governor.acquire(who, never)));
    permits[2]!.streaming();
    permits[3]!.streaming();
    permits[0]!.release({ kind: 'throttled', retryAfterMs: 0 });
    permits[1]!.release({ kind: 'throttled', retryAfterMs: 0 });
    // Two were being served: the limit is 2 once the pause is over, and the second push-back of the round did not cut again.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(governor.status().limit).toBe(2);
    permits[2]!.release({ kind: 'ok' });
    permits[3]!.release({ kind: 'ok' });
    for (let i = 0; i < 30; i++) {
      const batch = await Promise.all(Array.from({ length: governor.status().limit }, () => governor.acquire(who, never)));
      for (const permit of batch) permit.release({ kind: 'ok' });
    }
    // The cut level holds for a minute: no probe past it yet.
    expect(governor.status().limit).toBe(2);
  });

  it('grows a limit that is used, by half a request per success before any push-back', async () => {
    const governor = new EndpointGovernor('http://x');
    const who = { client: 'c', lineage: 'l' };
    const permits = await Promise.all(Array.from({ length: INITIAL_LIMIT }, () => governor.acquire(who, never)));
    permits[0]!.release({ kind: 'ok' });
    permits[1]!.release({ kind: 'ok' }); // 3 in flight under 4.5: not full, no growth
    expect(governor.status().limit).toBe(INITIAL_LIMIT);
    for (const permit of permits.slice(2)) permit.release({ kind: 'ok' });
  });

  it('a cancelled wait leaves the queue and rejects with the signal reason', async () => {
    const governor = new EndpointGovernor('http://x', { maxConcurrent: 1 });
    const held = await governor.acquire({ client: 'a', lineage: 'a' }, never);
    const controller = new AbortController();
    const positions: number[] = [];
    const waiting = governor.acquire({ client: 'b', lineage: 'b' }, controller.signal, (position) => positions.push(position));
    expect(positions).toEqual([1]);
    expect(governor.status().waiting).toBe(1);
    controller.abort(new Error('cancelled by the owner'));
    await expect(waiting).rejects.toThrow('cancelled by the owner');
    expect(governor.status().waiting).toBe(0);
    held.release({ kind: 'ok' });
    expect(governor.status().inFlight).toBe(0);
  });

  it('requestsPerMinute holds the next request until the window has room', async () => {
    const governor = new EndpointGovernor('http://x', { requestsPerMinute: 2 });
    const who = { client: 'c', lineage: 'l' };
    (await governor.acquire(who, never)).release({ kind: 'ok' });
    (await governor.acquire(who, never)).release({ kind: 'ok' });
    const controller = new AbortController();
    let granted = false;
    const third = governor.acquire(who, controller.signal).then(() => (granted = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(granted).toBe(false);
    expect(governor.status()).toMatchObject({ waiting: 1, requestsPerMinute: 2, requestsPerMinuteLimit: 2 });
    controller.abort(new Error('stop'));
    await expect(third).rejects.toThrow('stop');
    governor.close();
  });

  it('tokensPerMinute holds requests once the minute has used its tokens', async () => {
    const governor = new EndpointGovernor('http://x', { tokensPerMinute: 100 });
    const who = { client: 'c', lineage: 'l' };
    (await governor.acquire(who, never)).release({ kind: 'ok', tokens: 150 });
    const controller = new AbortController();
    const positions: number[] = [];
    const next = governor.acquire(who, controller.signal, (p) => positions.push(p));
    expect(positions).toEqual([1]);
    controller.abort(new Error('stop'));
    await expect(next).rejects.toThrow('stop');
    governor.close();
  });
});

describe('EndpointGovernor windows', () => {
  it('tokensPerMinute: a request reserves the usage seen (the first goes alone as a probe), so responses in flight cannot overshoot the budget', async () => {
    const governor = new EndpointGovernor('http://x', { tokensPerMinute: 600 });
    const who = { client: 'c', lineage: 'l' };
    const granted: Permit[] = [];
    const waits = Array.from({ length: 4 }, () => governor.acquire(who, never).then((permit) => granted.push(permit)));
    await tick();
    expect(granted).toHaveLength(1); // before any usage is known: one probe
    granted[0]!.release({ kind: 'ok', tokens: 200 });
    await tick();
    // 200 used + 2 × 200 reserved = the budget: the fourth waits for the window.
    expect(granted).toHaveLength(3);
    expect(governor.status()).toMatchObject({ tokensPerMinute: 600, waiting: 1 });
    // A response that used less gives the difference back at once.
    granted[1]!.release({ kind: 'ok', tokens: 0 });
    await tick();
    expect(granted).toHaveLength(4);
    for (const permit of granted.slice(2)) permit.release({ kind: 'ok', tokens: 200 });
    await Promise.all(waits);
    governor.close();
  });

  it('requestsPerMinute slides: a send counts for 60 s and the slack after it, whatever minute it fell in', async () => {
    let clock = 1_800_000_000_000 + 59_900; // 100 ms before a minute's turn
    const governor = new EndpointGovernor('http://x', { requestsPerMinute: 2 }, undefined, () => clock);
    const who = { client: 'c', lineage: 'l' };
    (await governor.acquire(who, never)).release({ kind: 'ok' });
    (await governor.acquire(who, never)).release({ kind: 'ok' });
    let granted = false;
    const third = governor.acquire(who, never).then((permit) => {
      granted = true;
      permit.release({ kind: 'ok' });
    });
    for (const later of [200, 30_000, 60_100]) {
      clock = 1_800_000_000_000 + 59_900 + later;
      governor.configure({ requestsPerMinute: 2 }); // a reload pumps the queue
      await tick();
      expect(granted).toBe(false);
    }
    clock = 1_800_000_000_000 + 59_900 + 62_000;
    governor.configure({ requestsPerMinute: 2 });
    await third;
    expect(granted).toBe(true);
    governor.close();
  });
});

describe('Upstream', () => {
  it('one governor per base URL and key; the key never appears in what it shows', async () => {
    const upstream = new Upstream({ 'http://a/v1': { maxConcurrent: 3 }, '*': { maxConcurrent: 7 } });
    // Asked for twice at once (two children resolving one endpoint before the governor module loaded): one governor.
    const [a, again] = await Promise.all([upstream.governorFor('http://a/v1/', 'sk-secret-one'), upstream.governorFor('http://a/v1', 'sk-secret-one')]);
    expect(again).toBe(a);
    expect(await upstream.governorFor('http://a/v1', 'sk-secret-one')).toBe(a);
    expect(await upstream.governorFor('http://a/v1', 'sk-secret-two')).not.toBe(a);
    await upstream.governorFor('http://b/v1', 'sk-secret-one');
    const shown = JSON.stringify(upstream.status());
    expect(shown).not.toContain('sk-secret');
    expect(upstream.status().map((s) => [s.endpoint, s.maxConcurrent])).toEqual([
      ['http://a/v1', 3],
      ['http://a/v1', 3],
      ['http://b/v1', 7],
    ]);
    expect(endpointIdentity('http://a/v1', 'k').id).not.toContain('k#');
  });
});
