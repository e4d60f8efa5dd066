/**
 * The one write a front owes a fresh start that executes on its own member: the child's id with
 * the token's hash (cluster-ledger.ts), made when the start is answered. Until it lands, the
 * worker holds back its own next write of that run (its outcome, a dispose): both would
 * compare-and-set from the same revision, and the worker's would be refused, costing it a refused
 * write and a read on every short run. The worker's wait is bounded (`settledOrAfter`), so a
 * front that never writes (its start was abandoned) cannot hold an outcome back for long.
 *
 * A child that settles before that write has left (a short run: its outcome is known in the turn
 * its start is answered) hands its outcome to the write instead (`offer`): the record is created
 * settled, one write where there were two, and the worker writes nothing more for it. What the
 * pool sees is the same record a moment later, without the `running` step between.
 */
import type { ClusterRun } from './cluster-run.js';

/** What a settled child adds to its record: the worker's outcome write. */
export type Outcome = Partial<ClusterRun>;

interface Owed {
  readonly landed: Promise<void>;
  readonly done: () => void;
  /** The outcome offered while the write had not left. */
  outcome?: Outcome;
  /** The write has left (its payload was made): it takes no outcome any more. */
  left: boolean;
}

export class AnswerWrites {
  private readonly pending = new Map<string, Owed>();

  /** The front will write `runId`'s record; the promise resolves once it did (or will not). */
  expect(runId: string): Promise<void> {
    let done!: () => void;
    const landed = new Promise<void>((resolve) => (done = resolve));
    this.pending.set(runId, { landed, done, left: false });
    return landed;
  }

  /** The worker's outcome for `runId`, carried by the front's write if it has not left yet: whether it will be. */
  offer(runId: string, outcome: Outcome): boolean {
    const owed = this.pending.get(runId);
    if (!owed || owed.left) return false;
    owed.outcome = outcome;
    return true;
  }

  /** The front's write of `runId` leaves now: the outcome offered so far, if any (none is taken after). */
  leaving(runId: string): Outcome | undefined {
    const owed = this.pending.get(runId);
    if (!owed) return undefined;
    owed.left = true;
    return owed.outcome;
  }

  /** The front's write of `runId` ended: written, refused for good, or never to be made. */
  done(runId: string): void {
    this.pending.get(runId)?.done();
    this.pending.delete(runId);
  }
}

/** `landed`, or `boundMs` later, whichever is first. */
export async function settledOrAfter(landed: Promise<void>, boundMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([landed, new Promise<void>((resolve) => (timer = setTimeout(resolve, boundMs)))]);
  clearTimeout(timer);
}
