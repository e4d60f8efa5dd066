/**
 * What a connection may cost before it has said who it is. Until its `initialize` is accepted a
 * peer is anyone who can reach a listener (on TCP: any local process), so the bytes it makes the
 * daemon hold are bounded twice:
 *  - per connection (`limits.preAuthBytes`, 64 KiB): an `initialize` frame fits many times over;
 *    a peer that sends more before being accepted is closed, saying so;
 *  - for all of them together (`limits.preAuthTotalBytes`, 4 MiB): past it, the connections
 *    that have been waiting longest are closed first, so a crowd of slow senders cannot hold
 *    the daemon's memory, and a newcomer with the token still gets its turn.
 * Bytes are counted as they are read (an upper bound on what the frame reader holds) and
 * forgotten once the connection is accepted or closed.
 */

export const DEFAULT_PRE_AUTH_BYTES = 64 * 1024;
export const DEFAULT_PRE_AUTH_TOTAL_BYTES = 4 * 1024 * 1024;

/** A connection not yet accepted, as the budget sees it. */
export interface PreAuthPeer {
  /** Close it at once, telling the peer `reason`; its bytes are released by the budget. */
  evict(reason: string): void;
}

export class PreAuthBudget {
  /** Bytes read from each peer not yet accepted, oldest peer first (insertion order). */
  private readonly held = new Map<PreAuthPeer, number>();
  private total = 0;

  constructor(
    readonly perConnection = DEFAULT_PRE_AUTH_BYTES,
    readonly allConnections = DEFAULT_PRE_AUTH_TOTAL_BYTES,
  ) {}

  /** `peer` sent `bytes` more before being accepted: evicts whoever the bounds say must go. */
  add(peer: PreAuthPeer, bytes: number): void {
    const mine = (this.held.get(peer) ?? 0) + bytes;
    this.held.set(peer, mine);
    this.total += bytes;
    if (mine > this.perConnection) {
      this.drop(peer, `sent ${mine} bytes before initialize was accepted, over the ${this.perConnection}-byte limit (limits.preAuthBytes)`);
      return;
    }
    for (const [oldest] of this.held) {
      if (this.total <= this.allConnections) break;
      this.drop(oldest, `connections not yet initialized hold over ${this.allConnections} bytes together (limits.preAuthTotalBytes); the longest waiting is closed first`);
    }
  }

  /** The peer was accepted or closed: its bytes no longer count. */
  release(peer: PreAuthPeer): void {
    const mine = this.held.get(peer);
    if (mine === undefined) return;
    this.held.delete(peer);
    this.total -= mine;
  }

  /** Bytes counted for peers not yet accepted (for status and tests). */
  get heldBytes(): number {
    return this.total;
  }

  private drop(peer: PreAuthPeer, reason: string): void {
    this.release(peer);
    peer.evict(reason);
  }
}
