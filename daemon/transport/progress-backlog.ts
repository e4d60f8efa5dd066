/**
 * Streamed progress waiting for a slow reader. Text deltas of a run are merged into one, so a
 * reader that falls behind gets the same text in fewer messages; past the size bound the oldest
 * progress is dropped (and counted). Lifecycle events never pass through here: they are sent
 * as they come, so `subagent/end` is never dropped.
 */
import type { RunEvent } from '../../protocol/index.js';

const sizeOf = (event: RunEvent): number => (event.kind === 'session' ? JSON.stringify(event.event).length : event.text.length);

export class ProgressBacklog {
  private readonly runs = new Map<string, RunEvent[]>();
  private bytes = 0;
  private count = 0;
  /** Events dropped since the connection opened. */
  dropped = 0;

  constructor(private readonly maxBytes: number) {}

  get size(): number {
    return this.count;
  }

  push(runId: string, event: RunEvent): void {
    let queue = this.runs.get(runId);
    if (!queue) this.runs.set(runId, (queue = []));
    const last = queue[queue.length - 1];
    if (last && last.kind === event.kind && (event.kind === 'text-delta' || event.kind === 'reasoning-delta')) {
      queue[queue.length - 1] = { kind: event.kind, text: (last as { text: string }).text + event.text };
    } else {
      queue.push(event);
      this.count += 1;
    }
    this.bytes += sizeOf(event);
    while (this.bytes > this.maxBytes && this.count > 0) this.dropOldest();
  }

  /** All of one run's waiting events, in order (sent before its `subagent/end`). */
  take(runId: string): RunEvent[] {
    const queue = this.runs.get(runId) ?? [];
    this.runs.delete(runId);
    this.forget(queue);
    return queue;
  }

  /** Up to `limit` waiting events, fairly across runs, each run's in order. */
  takeSome(limit: number): Array<[string, RunEvent]> {
    const out: Array<[string, RunEvent]> = [];
    while (out.length < limit && this.count > 0) {
      for (const [runId, queue] of this.runs) {
        const event = queue.shift();
        if (event) {
          out.push([runId, event]);
          this.forget([event]);
        }
        if (queue.length === 0) this.runs.delete(runId);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  private dropOldest(): void {
    let fattest: RunEvent[] | undefined;
    for (const queue of this.runs.values()) if (!fattest || queue.length > fattest.length) fattest = queue;
    const event = fattest?.shift();
    if (!event) return;
    this.forget([event]);
    this.dropped += 1;
  }

  private forget(events: RunEvent[]): void {
    for (const event of events) {
      this.bytes -= sizeOf(event);
      this.count -= 1;
    }
  }
}
