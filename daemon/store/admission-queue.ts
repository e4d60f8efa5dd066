/**
 * One concurrency budget for every client of this daemon (the local ledger's admission): a
 * global cap on live runs and a per-connection cap. Starts over the limit wait in a fair queue
 * (round-robin across connections, FIFO within one), bounded in length; past that bound a start
 * is OVERLOADED at once. A waiting start still honours its AbortSignal. A waiter may ask for its
 * place in line (1 = next, in grant order, counting every connection as having room): it is told
 * on entry and whenever it changes, once per batch of queue changes.
 */
import { SubagentError } from '../../protocol/index.js';
import type { AdmissionLimits, AdmissionStats, Lease } from './run-ledger.js';

export type { AdmissionLimits } from './run-ledger.js';

export const DEFAULT_ADMISSION_LIMITS: AdmissionLimits = { maxConcurrentRuns: 64, maxRunsPerConnection: 32, maxQueued: 1024 };

interface Waiter {
  readonly grant: () => void;
  readonly onPosition: ((position: number) => void) | undefined;
  /** The position last told, 0 before the first. */
  told: number;
}

/** A held slot: one object per grant, released once (later calls do nothing). */
class Slot implements Lease {
  private released = false;

  constructor(
    private readonly queue: AdmissionQueue,
    readonly owner: string,
  ) {}

  release(): void {
    if (this.released) return;
    this.released = true;
    this.queue.giveBack(this.owner);
  }
}

export class AdmissionQueue {
  private running = 0;
  private queued = 0;
  private readonly runningBy = new Map<string, number>();
  /** Waiters per connection, and connections in round-robin order. */
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly rotation: string[] = [];
  private positionsDue = false;

  constructor(readonly limits: AdmissionLimits) {}

  stats(): AdmissionStats {
    const byConnection: Record<string, { running: number; queued: number }> = {};
    for (const [id, n] of this.runningBy) byConnection[id] = { running: n, queued: 0 };
    for (const [id, list] of this.waiting) byConnection[id] = { running: this.runningBy.get(id) ?? 0, queued: list.length };
    return { running: this.running, queued: this.queued, byConnection };
  }

  acquire(owner: string, signal: AbortSignal, onPosition?: (position: number) => void): Promise<Lease> {
    if (signal.aborted) return Promise.reject(new SubagentError('ABORTED', 'start was cancelled while waiting for a slot'));
    if (this.waiting.size === 0 && this.fits(owner)) return Promise.resolve(this.take(owner));
    if (this.queued >= this.limits.maxQueued) {
      const { maxConcurrentRuns, maxRunsPerConnection, maxQueued } = this.limits;
      return Promise.reject(
        new SubagentError(
          'OVERLOADED',
          `the daemon is at capacity (maxConcurrentRuns ${maxConcurrentRuns}, maxRunsPerConnection ${maxRunsPerConnection}, maxQueued ${maxQueued}); retry later`,
        ),
      );
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.take(owner));
        },
        onPosition,
        told: 0,
      };
      const onAbort = (): void => {
        if (this.remove(owner, waiter)) reject(new SubagentError('ABORTED', 'start was cancelled while waiting for a slot'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const list = this.waiting.get(owner);
      if (list) list.push(waiter);
      else {
        this.waiting.set(owner, [waiter]);
        this.rotation.push(owner);
      }
      this.queued += 1;
      this.pump();
      this.positionsChanged();
    });
  }

  /** Recount places in line after this turn's changes: one pass however many changes there were. */
  private positionsChanged(): void {
    if (this.positionsDue) return;
    this.positionsDue = true;
    queueMicrotask(() => {
      this.positionsDue = false;
      this.tellPositions();
    });
  }

  /** Walk the grant order (pass k serves the k-th waiter of each connection, in rotation) and tell whoever moved. */
  private tellPositions(): void {
    let position = 0;
    let lists = this.rotation.map((owner) => this.waiting.get(owner)!);
    for (let k = 0; lists.length > 0; k++) {
      for (const list of lists) {
        const waiter = list[k]!;
        position += 1;
        if (waiter.onPosition && waiter.told !== position) {
          waiter.told = position;
          try {
            waiter.onPosition(position);
          } catch {
            // A listener's fault must not stall the queue.
          }
        }
      }
      lists = lists.filter((list) => list.length > k + 1);
    }
  }

  private fits(owner: string): boolean {
    return this.running < this.limits.maxConcurrentRuns && (this.runningBy.get(owner) ?? 0) < this.limits.maxRunsPerConnection;
  }

  private take(owner: string): Lease {
    this.running += 1;
    this.runningBy.set(owner, (this.runningBy.get(owner) ?? 0) + 1);
    return new Slot(this, owner);
  }

  /** A slot came back (Slot.release, once per grant). */
  giveBack(owner: string): void {
    this.running -= 1;
    const n = (this.runningBy.get(owner) ?? 1) - 1;
    if (n === 0) this.runningBy.delete(owner);
    else this.runningBy.set(owner, n);
    this.pump();
  }

  /** Grant slots round-robin: each connection with a waiter and room gets one per pass. */
  private pump(): void {
    let granted = true;
    while (granted && this.running < this.limits.maxConcurrentRuns) {
      granted = false;
      for (let i = 0; i < this.rotation.length && this.running < this.limits.maxConcurrentRuns; i++) {
        const owner = this.rotation[0]!;
        // Move this connection to the back: the next grant goes to someone else first.
        this.rotation.push(this.rotation.shift()!);
        if (!this.fits(owner)) continue;
        const list = this.waiting.get(owner)!;
        const waiter = list.shift()!;
        this.queued -= 1;
        if (list.length === 0) this.drop(owner);
        waiter.grant();
        this.positionsChanged();
        granted = true;
        break;
      }
    }
  }

  private remove(owner: string, waiter: Waiter): boolean {
    const list = this.waiting.get(owner);
    const index = list?.indexOf(waiter) ?? -1;
    if (!list || index < 0) return false;
    list.splice(index, 1);
    this.queued -= 1;
    if (list.length === 0) this.drop(owner);
    this.positionsChanged();
    return true;
  }

  private drop(owner: string): void {
    this.waiting.delete(owner);
    const at = this.rotation.indexOf(owner);
    if (at >= 0) this.rotation.splice(at, 1);
  }
}
