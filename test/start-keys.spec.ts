/**
 * The single daemon's idempotency store (daemon/idempotency/start-keys.ts) on its own: a repeat
 * gets the first start's run, waiting while it is made; a failed first start leaves nothing; the
 * window and the bound drop the oldest made keys, never one still being made.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { StartKeys, type FirstStart, type KeyClaim, type StartKeyStore } from '../daemon/idempotency/start-keys.js';

const NEVER = new AbortController().signal;
const first = (claim: KeyClaim): FirstStart => {
  if ('run' in claim) throw new Error(`expected a first start, got run ${claim.run.runId}`);
  return claim;
};

afterEach(() => vi.useRealTimers());

describe('StartKeys', () => {
  it('a repeat gets the run the first start made, with its token; another owner or key starts afresh', async () => {
    const keys: StartKeyStore = new StartKeys();
    const made = first(await keys.claim('session-a', 'k1', 'run_1', NEVER));
    expect(made.runId).toBe('run_1');
    made.first({ runId: 'run_1', runToken: 'token-1' });
    expect(await keys.claim('session-a', 'k1', 'run_2', NEVER)).toMatchObject({ run: { runId: 'run_1', runToken: 'token-1' } });
    expect(first(await keys.claim('session-b', 'k1', 'run_3', NEVER)).runId).toBe('run_3');
    expect(first(await keys.claim('session-a', 'k2', 'run_4', NEVER)).runId).toBe('run_4');
  });

  it('a repeat while the first is being made waits for it; after a failed first it makes the run itself', async () => {
    const keys: StartKeyStore = new StartKeys();
    const one = first(await keys.claim('s', 'k', 'run_1', NEVER));
    const waiting = keys.claim('s', 'k', 'run_2', NEVER);
    const alsoWaiting = keys.claim('s', 'k', 'run_3', NEVER);
    one.first(undefined);
    const two = first(await waiting);
    expect(two.runId).toBe('run_2');
    two.first({ runId: 'run_2', runToken: 't2' });
    expect(await alsoWaiting).toMatchObject({ run: { runId: 'run_2', runToken: 't2' } });
  });

  it('keys are forgotten after the window, and past the bound the oldest made ones go first; a start being made keeps its key', async () => {
    vi.useFakeTimers({ now: 1_000_000, toFake: ['Date'] });
    const keys: StartKeyStore = new StartKeys(60_000, 3);
    for (const n of [1, 2]) first(await keys.claim('s', `k${n}`, `run_${n}`, NEVER)).first({ runId: `run_${n}`, runToken: `t${n}` });
    const pending = first(await keys.claim('s', 'pending', 'run_p', NEVER));
    // At the bound: each claim drops the oldest made key (k1, then k2), and stops at the start still being made.
    first(await keys.claim('s', 'k3', 'run_3', NEVER)).first({ runId: 'run_3', runToken: 't3' });
    expect(first(await keys.claim('s', 'k1', 'run_1b', NEVER)).runId).toBe('run_1b');
    const again = first(await keys.claim('s', 'k2', 'run_2b', NEVER));
    expect(again.runId).toBe('run_2b');
    again.first({ runId: 'run_2b', runToken: 't2b' });
    pending.first({ runId: 'run_p', runToken: 'tp' });
    expect(await keys.claim('s', 'k2', 'run_2c', NEVER)).toMatchObject({ run: { runId: 'run_2b' } });
    vi.setSystemTime(1_000_000 + 60_001);
    expect(first(await keys.claim('s', 'k3', 'run_3b', NEVER)).runId).toBe('run_3b');
  });

  it('past the bound over many claims, with failed first starts among them, the newest made keys stay and only they', async () => {
    const bound = 1000;
    const keys: StartKeyStore = new StartKeys(60_000, bound);
    const made: string[] = [];
    for (let n = 0; n < 5000; n++) {
      const claim = first(await keys.claim('s', `k${n}`, `run_${n}`, NEVER));
      // Every seventh first start fails: its key is forgotten, never counted against the bound.
      if (n % 7 === 3) claim.first(undefined);
      else {
        claim.first({ runId: `run_${n}`, runToken: `t${n}` });
        made.push(`k${n}`);
      }
    }
    // The store is full with the newest `bound` made keys: the next claim drops the oldest of them,
    // and every other one still answers its run.
    const kept = made.slice(-bound);
    for (const key of kept.slice(1).reverse()) expect(await keys.claim('s', key, 'again', NEVER)).toMatchObject({ run: { runId: `run_${key.slice(1)}` } });
    expect(first(await keys.claim('s', kept[0]!, 'afresh', NEVER)).runId).toBe('afresh');
    expect(first(await keys.claim('s', made.at(-bound - 1)!, 'afresh-too', NEVER)).runId).toBe('afresh-too');
    expect(first(await keys.claim('s', 'k3', 'afresh-failed', NEVER)).runId).toBe('afresh-failed');
  });
});
