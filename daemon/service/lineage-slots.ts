/**
 * Admission of nested starts: the one rule that keeps lineages from deadlocking the pool.
 *
 * A root run (a client's start) takes a slot of the shared budget (store/admission-queue.ts).
 * A nested start — a child of this daemon delegating with the `subagent` tool — never does: its
 * parent waits on it in the foreground (nested tools have no background mode), so the parent
 * lends it its own slot. One child at a time runs on a parent's slot; a parent's further nested
 * starts wait, in order, for that slot to come back (they never queue behind other clients).
 * So a lineage holds exactly its root's slot however deep it goes, a waiting parent never keeps
 * its descendants from running, and for any `maxConcurrentRuns ≥ 1` every lineage completes.
 */
import { SubagentError } from '../../protocol/index.js';
import type { Lease } from '../store/run-ledger.js';

interface Lender {
  lent: boolean;
  readonly waiting: Array<{ grant(): void }>;
}

export interface LineageSlotStats {
  /** Runs on a slot lent by their parent. */
  readonly descendants: number;
  /** Nested starts waiting for their parent's slot to come back. */
  readonly waiting: number;
}

export class LineageSlots {
  private readonly lenders = new Map<string, Lender>();
  private descendants = 0;
  private waiting = 0;

  stats(): LineageSlotStats {
    return { descendants: this.descendants, waiting: this.waiting };
  }

  /** The slot of `parentRunId`, lent to one of its children at a time; ABORTED on `signal`. */
  borrow(parentRunId: string, signal: AbortSignal): Promise<Lease> {
    if (signal.aborted) return Promise.reject(aborted());
    let lender = this.lenders.get(parentRunId);
    if (!lender) this.lenders.set(parentRunId, (lender = { lent: false, waiting: [] }));
    if (!lender.lent) return Promise.resolve(this.lend(parentRunId, lender));
    const held = lender;
    return new Promise<Lease>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.lend(parentRunId, held));
        },
      };
      const onAbort = (): void => {
        const at = held.waiting.indexOf(waiter);
        if (at < 0) return;
        held.waiting.splice(at, 1);
        this.waiting -= 1;
        this.tidy(parentRunId, held);
        reject(aborted());
      };
      signal.addEventListener('abort', onAbort, { once: true });
      held.waiting.push(waiter);
      this.waiting += 1;
    });
  }

  private lend(parentRunId: string, lender: Lender): Lease {
    lender.lent = true;
    this.descendants += 1;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.descendants -= 1;
        lender.lent = false;
        const next = lender.waiting.shift();
        if (next) {
          this.waiting -= 1;
          next.grant();
        } else this.tidy(parentRunId, lender);
      },
    };
  }

  private tidy(parentRunId: string, lender: Lender): void {
    if (!lender.lent && lender.waiting.length === 0 && this.lenders.get(parentRunId) === lender) this.lenders.delete(parentRunId);
  }
}

function aborted(): SubagentError {
  return new SubagentError('ABORTED', 'start was cancelled while waiting for its parent\'s slot');
}
