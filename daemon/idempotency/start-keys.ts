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
   * ends the wait (the start was cancelled).
   */
  claim(owner: string, key: string, runId: string, signal: AbortSignal): Promise<KeyClaim>;
}

interface Entry {
  readonly at: number;
  run?: KeyedRun;
  readonly made: Promise<KeyedRun | undefined>;
}

export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 10 * 60_000;
const MAX_ENTRIES = 100_000;

export class StartKeys implements StartKeyStore {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly windowMs = DEFAULT_IDEMPOTENCY_WINDOW_MS,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  /** The first start under `owner`'s `key` makes the run; a later one gets it (waiting while it is made). */
  async claim(owner: string, key: string, runId: string): Promise<KeyClaim> {
    const scope = `${owner}\n${key}`;
    for (;;) {
      this.prune();
      const entry = this.entries.get(scope);
      if (!entry) return this.open(scope, runId);
      if (entry.run) return { run: entry.run };
      const run = await entry.made;
      if (run) return { run };
      // The first start failed and forgot the key: this one makes it (unless another got there first).
    }
  }

  private open(scope: string, runId: string): FirstStart {
    let settle!: (run: KeyedRun | undefined) => void;
    const entry: Entry = { at: Date.now(), made: new Promise((resolve) => (settle = resolve)) };
    this.entries.set(scope, entry);
    return {
      runId,
      first: (run) => {
        if (run) entry.run = run;
        else if (this.entries.get(scope) === entry) this.entries.delete(scope);
        settle(run);
      },
    };
  }

  /** Entries are in the order they were made: expired ones, and any past the bound, leave from the front. */
  private prune(): void {
    const expired = Date.now() - this.windowMs;
    for (const [scope, entry] of this.entries) {
      if (entry.at > expired && this.entries.size < this.maxEntries) break;
      if (!entry.run && entry.at > expired) break; // a start still being made keeps its key
      this.entries.delete(scope);
    }
  }
}
