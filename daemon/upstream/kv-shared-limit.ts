/**
 * An endpoint's concurrency held for a whole cluster: leased permits in a JetStream KV bucket, one
 * key per endpoint (its identity hashed: never the key), changed only by compare-and-set. A
 * member takes a permit by writing itself into the key's holders while fewer than `max` hold one,
 * and removes it when the request ends. A lease (LEASE_MS) bounds what a member that died holding
 * permits keeps: past it, its permits no longer count.
 */
import { Kvm, type KV } from '@nats-io/kv';
import { createHash, randomUUID } from '../../common/node-builtins.js';
import type { SharedLimit, SharedPermit } from './shared-limit.js';

/** Longer than a model step may take (10 min by default), so a live request never loses its permit. */
export const LEASE_MS = 11 * 60_000;
/** How often a member that found the pool full looks again. */
const POLL_MS = 50;

type Holders = Record<string, number>;

export class KvPermits {
  private constructor(private readonly kv: KV) {}

  /** Opens (or creates) the bucket; members starting together may race to create it. */
  static async open(js: ConstructorParameters<typeof Kvm>[0], bucket: string): Promise<KvPermits> {
    const kvm = new Kvm(js);
    const kv = await kvm.create(bucket, { history: 1 } as never).catch(() => kvm.open(bucket));
    return new KvPermits(kv);
  }

  /** The pool-wide limit of one endpoint: at most `max` permits held at once by all members. */
  limit(endpointId: string, max: number): SharedLimit {
    const key = `ep_${createHash('sha256').update(endpointId).digest('hex').slice(0, 32)}`;
    return { acquire: (signal) => this.acquire(key, max, signal) };
  }

  private async acquire(key: string, max: number, signal: AbortSignal): Promise<SharedPermit> {
    const id = randomUUID();
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const taken = await this.change(key, (holders) => {
        if (Object.keys(holders).length >= max) return undefined;
        holders[id] = Date.now() + LEASE_MS;
        return holders;
      });
      if (taken) return { release: () => void this.change(key, (holders) => (delete holders[id], holders)).catch(() => undefined) };
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  /** Applies `edit` to the key's live holders by compare-and-set, retrying on conflict; false when `edit` declined. */
  private async change(key: string, edit: (holders: Holders) => Holders | undefined): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      const entry = await this.kv.get(key);
      const now = Date.now();
      const holders: Holders = {};
      if (entry !== null && entry.operation === 'PUT') {
        for (const [id, until] of Object.entries(entry.json<Holders>())) if (until > now) holders[id] = until;
      }
      const next = edit(holders);
      if (next === undefined) return false;
      try {
        if (entry === null) await this.kv.create(key, JSON.stringify(next));
        else await this.kv.update(key, JSON.stringify(next), entry.revision);
        return true;
      } catch (error) {
        // Another member changed the key since we read it: read again (a failure that persists is no race).
        if (attempt >= 50) throw error;
      }
    }
  }
}
