/**
 * The service's one seam for watching runs from outside it (metrics, traces, the web view:
 * daemon/telemetry/, daemon/ui/). An observer hears every run's start, its admission, its
 * readiness, each of its events (streamed or not), and its end. It is told, never asked: it
 * cannot change a run, and a throwing observer is contained here (the run goes on).
 *
 * With no observer the service pays one undefined check per call site.
 */
import type { EndParams, RunEvent } from '../../protocol/index.js';

/** A start that passed its checks: it waits for a slot next. */
export interface ObservedStart {
  readonly runId: string;
  readonly provider: string;
  readonly label?: string;
  /** The model the start asked for (`agentOptions.model`), when it named one. */
  readonly model?: string;
  /** The run whose child started this one (nested delegation inside the daemon). */
  readonly parentRunId?: string;
  /** The run this one continues (a resume). */
  readonly resumedFrom?: string;
  readonly depth: number;
  /** The owning connection's id and the name its client gave at `initialize`. */
  readonly connectionId: string;
  readonly client?: string;
  /** The caller's W3C trace context, as sent on the start (protocol: `traceparent`). */
  readonly traceparent?: string;
}

export interface RunObserver {
  starting?(start: ObservedStart): void;
  /** The start got its slot after waiting `waitedMs`; the provider starts the child now. */
  admitted?(runId: string, waitedMs: number): void;
  /** The child is ready and published (its start is answered next). */
  ready?(runId: string, child: { readonly id: string }): void;
  /** The start failed or was cancelled before the child was ready. */
  startFailed?(runId: string, code: string): void;
  /** Every event of a live run, whether or not its owner asked for a stream. */
  event?(runId: string, event: RunEvent): void;
  ended?(end: EndParams): void;
}

/** Calls every observer, each contained: one that throws is reported once and the rest still hear. */
export class RunObservers implements Required<RunObserver> {
  private readonly all: RunObserver[] = [];
  private reported = false;

  constructor(private readonly onFault: (error: unknown) => void) {}

  add(observer: RunObserver): () => void {
    this.all.push(observer);
    return () => void this.all.splice(this.all.indexOf(observer) >>> 0, 1);
  }

  get size(): number {
    return this.all.length;
  }

  starting(start: ObservedStart): void {
    this.each((o) => o.starting?.(start));
  }
  admitted(runId: string, waitedMs: number): void {
    this.each((o) => o.admitted?.(runId, waitedMs));
  }
  ready(runId: string, child: { readonly id: string }): void {
    this.each((o) => o.ready?.(runId, child));
  }
  startFailed(runId: string, code: string): void {
    this.each((o) => o.startFailed?.(runId, code));
  }
  event(runId: string, event: RunEvent): void {
    this.each((o) => o.event?.(runId, event));
  }
  ended(end: EndParams): void {
    this.each((o) => o.ended?.(end));
  }

  private each(call: (observer: RunObserver) => void): void {
    for (const observer of this.all) {
      try {
        call(observer);
      } catch (error) {
        if (!this.reported) this.onFault(error);
        this.reported = true;
      }
    }
  }
}
