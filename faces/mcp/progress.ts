/**
 * Turns a run's events into MCP `notifications/progress` for a call that carried a
 * `progressToken`. Hosts cancel a tool call after a stretch with neither a response nor progress
 * (Qwen Code: 300 s by default), and a child waiting on a slow model step emits nothing, so a
 * heartbeat keeps reporting while the run lives. `progress` only ever increases, as MCP requires.
 * Send failures are dropped: the call's own response reports what matters.
 */
import { describeWait, isWaitEvent } from '../../common/progress-text.js';
import type { RunEvent } from '../../protocol/index.js';

export type ProgressSink = (progress: number, message: string) => Promise<void>;

/** Seconds between heartbeats of a quiet run: well inside any host's idle timeout. */
export const DEFAULT_HEARTBEAT_MS = 15_000;

/** What a person watching the host would want to read for one event, or undefined for none. */
export function describeEvent(event: RunEvent): string | undefined {
  if (event.kind === 'text-delta') return event.text.trim() ? event.text : undefined;
  if (event.kind === 'reasoning-delta') return undefined;
  if (isWaitEvent(event)) return describeWait(event);
  const e = event.event;
  if (e.type === 'assistant/message' && e.toolCalls?.length) return `calling ${e.toolCalls.map((c) => c.name).join(', ')}`;
  if (e.type === 'tool/result') return `${e.name} ${e.isError ? 'failed' : 'done'}`;
  if (e.type === 'turn/end') return `turn ended: ${e.reason}`;
  return undefined;
}

export class ProgressForwarder {
  private count = 0;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly send: ProgressSink,
    heartbeatMs: number,
  ) {
    this.heartbeat = setInterval(() => this.report('working'), heartbeatMs);
    this.heartbeat.unref();
  }

  readonly onEvent = (event: RunEvent): void => {
    const message = describeEvent(event);
    if (message !== undefined) this.report(message);
  };

  report(message: string): void {
    this.count += 1;
    this.send(this.count, message).catch(() => undefined);
  }

  stop(): void {
    clearInterval(this.heartbeat);
  }
}
