/**
 * Live daemon runs of this connection, by run id. A `tool/call` or `run/event` may reach the
 * client before the answer to its `subagent/start` has been processed (the id is minted by the
 * daemon), so a lookup of an unknown id waits while any start is in flight.
 */
import type { RunRecord } from './run-record.js';

interface Waiter {
  readonly runId: string;
  readonly resolve: (record: RunRecord | undefined) => void;
}

export class RunTable {
  private readonly records = new Map<string, RunRecord>();
  private startsInFlight = 0;
  private waiters: Waiter[] = [];

  add(record: RunRecord): void {
    this.records.set(record.runId, record);
    // Settled runs call no tools and get no events; forget them.
    record.onSettled(() => {
      if (this.records.get(record.runId) === record) this.records.delete(record.runId);
    });
    const ready = this.waiters.filter((waiter) => waiter.runId === record.runId);
    this.waiters = this.waiters.filter((waiter) => waiter.runId !== record.runId);
    for (const waiter of ready) waiter.resolve(record);
  }

  /** Mark a start in flight; call the returned function once its run is added (or it failed). */
  beginStart(): () => void {
    this.startsInFlight++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.startsInFlight > 0) return;
      for (const waiter of this.waiters.splice(0)) waiter.resolve(this.records.get(waiter.runId));
    };
  }

  /** The record, waiting for in-flight starts when the id is not known yet. */
  lookup(runId: string): RunRecord | undefined | Promise<RunRecord | undefined> {
    const record = this.records.get(runId);
    if (record || this.startsInFlight === 0) return record;
    return new Promise((resolve) => this.waiters.push({ runId, resolve }));
  }

  /** Every live run, left in place (to re-attach them after a reconnect). */
  live(): RunRecord[] {
    return [...this.records.values()];
  }

  /** Remove and return every live run (the connection is gone). */
  drain(): RunRecord[] {
    const all = [...this.records.values()];
    this.records.clear();
    for (const waiter of this.waiters.splice(0)) waiter.resolve(undefined);
    return all;
  }
}
