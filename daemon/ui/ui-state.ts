/**
 * What the web view shows, kept live from the service's run observer (run-observer.ts): each
 * run's place in its lineage, its client, state, usage and transcript, and the updates to push to
 * open pages. Bounded: a run's transcript keeps its last MAX_TRANSCRIPT_CHARS, and only the last
 * MAX_ENDED_RUNS ended runs stay.
 */
import { isoTime } from '../../common/iso-time.js';
import type { EndParams, RunEvent } from '../../protocol/index.js';
import type { ObservedStart, RunObserver } from '../service/run-observer.js';

const MAX_TRANSCRIPT_CHARS = 64 * 1024;
const MAX_ENDED_RUNS = 200;

export interface UiRun {
  readonly runId: string;
  readonly provider: string;
  readonly label?: string;
  readonly parentRunId?: string;
  readonly client: string;
  readonly connectionId: string;
  readonly depth: number;
  readonly startedAt: string;
  state: 'queued' | 'running' | 'ended';
  stopReason?: string;
  usage: { input: number; output: number };
  transcript: string;
}

export type UiUpdate = { kind: 'run'; run: UiRun } | { kind: 'text'; runId: string; text: string };

export class UiState implements RunObserver {
  readonly runs = new Map<string, UiRun>();
  private readonly subscribers = new Set<(update: UiUpdate) => void>();

  subscribe(listener: (update: UiUpdate) => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  starting(start: ObservedStart): void {
    this.put({
      runId: start.runId,
      provider: start.provider,
      ...(start.label !== undefined && { label: start.label }),
      ...(start.parentRunId !== undefined && { parentRunId: start.parentRunId }),
      client: start.client ?? 'unknown',
      connectionId: start.connectionId,
      depth: start.depth,
      startedAt: isoTime(),
      state: 'queued',
      usage: { input: 0, output: 0 },
      transcript: '',
    });
  }

  admitted(runId: string): void {
    this.change(runId, (run) => (run.state = 'running'));
  }

  startFailed(runId: string, code: string): void {
    this.change(runId, (run) => {
      run.state = 'ended';
      run.stopReason = code;
    });
  }

  event(runId: string, event: RunEvent): void {
    const run = this.runs.get(runId);
    if (!run) return;
    if (event.kind === 'text-delta') return this.text(run, event.text);
    if (event.kind !== 'session') return;
    const session = event.event;
    if (session.type === 'usage') {
      run.usage.input += session.usage.promptTokens;
      run.usage.output += session.usage.completionTokens;
      this.publish({ kind: 'run', run });
    } else if (session.type === 'assistant/message') {
      for (const call of session.toolCalls ?? []) this.text(run, `\n[tool ${call.name}]\n`);
    } else if (session.type === 'tool/result') {
      this.text(run, `[${session.name} ${session.isError ? 'failed' : 'done'}]\n`);
    }
  }

  ended(end: EndParams): void {
    this.change(end.runId, (run) => {
      run.state = 'ended';
      run.stopReason = end.stopReason;
      const usage = end.usage ?? end.result?.usage;
      // The run's own sums win over the steps counted so far (a provider may report only these).
      if (usage) run.usage = { input: usage.promptTokens, output: usage.completionTokens };
    });
    let ended = 0;
    for (const run of [...this.runs.values()].reverse()) {
      if (run.state === 'ended' && ++ended > MAX_ENDED_RUNS) this.runs.delete(run.runId);
    }
  }

  private text(run: UiRun, text: string): void {
    run.transcript = (run.transcript + text).slice(-MAX_TRANSCRIPT_CHARS);
    this.publish({ kind: 'text', runId: run.runId, text });
  }

  private put(run: UiRun): void {
    this.runs.set(run.runId, run);
    this.publish({ kind: 'run', run });
  }

  private change(runId: string, apply: (run: UiRun) => void): void {
    const run = this.runs.get(runId);
    if (!run) return;
    apply(run);
    this.publish({ kind: 'run', run });
  }

  private publish(update: UiUpdate): void {
    for (const listener of this.subscribers) listener(update);
  }
}
