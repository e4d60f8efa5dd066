/**
 * Idempotent starts: a `subagent/start` carrying an `idempotencyKey` is made once per owner and
 * key within the window. A repeat (a client retrying a start whose answer it never got) gets
 * the run the first one made; while the first is still being made, the repeat waits for it.
 *
 * Rules:
 * - The owner is the start's parent session (`parent.sessionId`), which a client keeps across
 *   its connections; the same key from another parent session is another key.
 * - A start that failed leaves nothing behind: a repeat makes the start afresh.
 * - Keys are forgotten `windowMs` after the start that made them (default 10 minutes), and the
 *   oldest go first past `maxEntries`, so memory stays bounded whatever clients send.
 *
 * This is a single daemon's store; a cluster member's is the pool's (cluster/pool-start-keys.ts),
 * behind the same `StartKeyStore` seam.
 */

/** The run a keyed start made, and the token its starter was answered with. */
export interface KeyedRun {
  readonly runId: string;
  readonly runToken: string;
}

/**
 * This start is the first under its key: make it under `runId` (the one proposed, or in a pool a
 * queued start its dead front left behind, which this start adopts), then report how it ended
 * (its run, or undefined when it failed).
 */
export interface FirstStart {
  readonly runId: string;
  readonly first: (run: KeyedRun | undefined) => void;
}

export type KeyClaim = FirstStart | { readonly run: KeyedRun };

/** Where the keys of keyed starts live: this daemon's memory, or the pool's KV bucket. */
export interface StartKeyStore {
  /**
   * The first start under `owner`'s `key` makes the run (under `runId`, minted by the caller,
   * unless the claim names another); a later one gets it, waiting while it is made. `signal`
   * ends the wait (the start was cancelled). `runToken`, minted before the claim, is the token
   * the start will be answered with: a store may keep it with the claim (the pool's does, so its
   * key costs one write), but hands it to a repeat only once the run is made.
   */
  claim(owner: string, key: string, runId: string, signal: AbortSignal, runToken?: string): KeyClaim | Promise<KeyClaim>;
}

/**
 * One key's start: while it is being made, the repeats that wait for it; once made, its run. One
 * small object per key and nothing else (no promise, no closure): a busy daemon holds up to
 * `maxEntries` of them for the whole window, and each one is copied out of the young generation
 * and traced by every full GC for as long as it is held. The same object stays from claim to made,
 * and knows when it left the map, so the order queue needs no lookup to skip a forgotten one.
 */
class Entry {
  runId: string | undefined = undefined;
  runToken: string | undefined = undefined;
  waiting: Array<(run: KeyedRun | undefined) => void> | undefined = undefined;
  /** Dropped from the map (expired, past the bound, or its first start failed): the order queue skips it. */
  gone = false;

  constructor(
    readonly scope: string,
    /** When the first start came, in ms since the store was made (a small integer, not a boxed number). */
    readonly at: number,
  ) {}
}

export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 10 * 60_000;
const MAX_ENTRIES = 100_000;

export class StartKeys implements StartKeyStore {
  private readonly entries = new Map<string, Entry>();
  /**
   * The entries in the order they were made, from `head` on; some forgotten since (a failed first
   * start). Not the map's own order: finding a map's oldest entry walks over every slot its
   * deletions left until the table is rebuilt, so at the bound, where each claim drops one, that
   * walk grew to tens of µs a start.
   */
  private order: Entry[] = [];
  private head = 0;
  private readonly epoch = Date.now();

  constructor(
    private readonly windowMs = DEFAULT_IDEMPOTENCY_WINDOW_MS,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  /**
   * The first start under `owner`'s `key` makes the run; a later one gets it (waiting while it is
   * made). Answered at once unless it must wait, so a start pays no extra turn for its key.
   */
  claim(owner: string, key: string, runId: string): KeyClaim | Promise<KeyClaim> {
    const scope = `${owner}\n${key}`;
    const now = Date.now() - this.epoch;
    this.prune(now);
    const entry = this.entries.get(scope);
    if (!entry) return this.open(scope, runId, now);
    if (entry.runId !== undefined) return { run: { runId: entry.runId, runToken: entry.runToken! } };
    return this.afterFirst(entry, owner, key, runId);
  }

  /** A repeat of a start still being made: its run, or (the first failed) a claim of its own. */
  private async afterFirst(entry: Entry, owner: string, key: string, runId: string): Promise<KeyClaim> {
    const run = await new Promise<KeyedRun | undefined>((resolve) => (entry.waiting ??= []).push(resolve));
    if (run) return { run };
    // The first start failed and forgot the key: this one makes it (unless another got there first).
    return this.claim(owner, key, runId);
  }

  private open(scope: string, runId: string, now: number): FirstStart {
    const entry = new Entry(scope, now);
    this.entries.set(scope, entry);
    this.order.push(entry);
    return {
      runId,
      first: (run) => {
        const waiting = entry.waiting;
        entry.waiting = undefined;
        // Still this start's key (not dropped past the bound meanwhile): it keeps its place in the order.
        if (!entry.gone) {
          if (run) {
            entry.runId = run.runId;
            entry.runToken = run.runToken;
          } else this.drop(entry);
        }
        for (const waiter of waiting ?? []) waiter(run);
      },
    };
  }

  private drop(entry: Entry): void {
    entry.gone = true;
    this.entries.delete(entry.scope);
  }

  /** Expired entries, and any past the bound, leave from the front (oldest first). */
  private prune(now: number): void {
    const expired = now - this.windowMs;
    while (this.head < this.order.length) {
      const entry = this.order[this.head]!;
      if (!entry.gone) {
        if (entry.at > expired && this.entries.size < this.maxEntries) break;
        if (entry.runId === undefined && entry.at > expired) break; // a start still being made keeps its key
        this.drop(entry);
      }
      this.head += 1;
    }
    // The queue's front is dropped in one go once it is the larger half.
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}
