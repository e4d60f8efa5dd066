/**
 * Streamed progress waiting for a slow reader. Text deltas of a run are merged into one, so a
 * reader that falls behind gets the same text in fewer messages. The backlog is bounded in bytes:
 * `push` refuses an event that would take it past the bound, and its owner treats that reader as
 * not reading (it disconnects it; nothing is dropped silently). Lifecycle events never pass
 * through here: they are sent as they come.
 */
import type { RunEvent } from '../../protocol/index.js';

const sizeOf = (event: RunEvent): number =>
  event.kind === 'session' ? JSON.stringify(event.event).length : !('text' in event) ? JSON.stringify(event).length : event.text.length;

export class ProgressBacklog {
  private readonly runs = new Map<string, RunEvent[]>();
  private bytes = 0;
  private count = 0;

  constructor(private readonly maxBytes: number) {}

  get size(): number {
    return this.count;
  }

  /** Bytes of progress waiting. */
  get waitingBytes(): number {
    return this.bytes;
  }

  /**
   * Queues the event; false (and nothing queued) when it would take the backlog past its bound.
   * An empty backlog takes any one event: it is already in memory, and it is what the reader lacks.
   */
  push(runId: string, event: RunEvent): boolean {
    if (this.bytes > 0 && this.bytes + sizeOf(event) > this.maxBytes) return false;
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
    return true;
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

  private forget(events: RunEvent[]): void {
    for (const event of events) {
      this.bytes -= sizeOf(event);
      this.count -= 1;
    }
  }
}
