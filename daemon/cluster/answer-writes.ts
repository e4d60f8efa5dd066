/**
 * The one write a front owes a fresh start that executes on its own member: the child's id with
 * the token's hash (cluster-ledger.ts), made when the start is answered. Until it lands, the
 * worker holds back its own next write of that run (its outcome, a dispose): both would
 * compare-and-set from the same revision, and the worker's would be refused, costing it a refused
 * write and a read on every short run. The worker's wait is bounded (`settledOrAfter`), so a
 * front that never writes (its start was abandoned) cannot hold an outcome back for long.
 */
export class AnswerWrites {
  private readonly pending = new Map<string, { readonly landed: Promise<void>; readonly done: () => void }>();

  /** The front will write `runId`'s record; the promise resolves once it did (or will not). */
  expect(runId: string): Promise<void> {
    let done!: () => void;
    const landed = new Promise<void>((resolve) => (done = resolve));
    this.pending.set(runId, { landed, done });
    return landed;
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
