/**
 * The run handle of an in-process child: one prompt (the first task or a resumption) being
 * driven to its result. Cancellation comes from the child's lifetime signal (the start request's
 * signal, shared by every resumption) or from `dispose()`.
 */
import { SubagentError, type ContentBlock, type InterruptLevel, type SubagentResult, type SubagentRun } from '../../../protocol/index.js';
import type { ChildAgent } from '../../agent/child-agent.js';

export interface ResumeOptions {
  /** Cancels the continuation instead of the child's lifetime signal (e.g. when that one is spent). */
  readonly signal?: AbortSignal;
}

/** Hooks from the provider: whether it still accepts work, and where live runs are tracked. */
export interface RunTracker {
  readonly closed: boolean;
  track(run: InProcessRun): void;
}

export class InProcessRun implements SubagentRun<ChildAgent> {
  readonly result: Promise<SubagentResult>;
  private readonly controller = new AbortController();
  private settled = false;
  private disposing: Promise<void> | undefined;

  constructor(
    readonly localAgent: ChildAgent,
    prompt: ContentBlock[],
    private readonly lifetime: AbortSignal,
    private readonly tracker: RunTracker,
    cancel: AbortSignal = lifetime,
  ) {
    const abort = (): void => this.controller.abort();
    if (cancel.aborted) abort();
    else cancel.addEventListener('abort', abort, { once: true });
    this.result = localAgent.run(prompt, this.controller.signal).finally(() => {
      this.settled = true;
      cancel.removeEventListener('abort', abort);
    });
    // Whoever holds the run observes the rejection; this branch only keeps it from going unhandled.
    this.result.catch(() => undefined);
    tracker.track(this);
  }

  get id(): string {
    return this.localAgent.id;
  }

  sendMessage(content: ContentBlock[]): void {
    if (this.settled || this.controller.signal.aborted) {
      throw new SubagentError('RUN_STATE', `run ${this.id} has ${this.settled ? 'settled' : 'been cancelled'}; nothing reads this message`);
    }
    this.localAgent.steer(content);
  }

  /** `now` cancels the turn; `after-step` lets the current step finish first. No-op once settled. */
  interrupt(level: InterruptLevel): void {
    if (this.settled) return;
    if (level === 'now') this.controller.abort();
    else this.localAgent.interruptAfterStep();
  }

  /** Continues the settled child's session with `content` as a new user message. */
  async resume(content: ContentBlock[], options: ResumeOptions = {}): Promise<InProcessRun> {
    if (this.tracker.closed) throw new SubagentError('SHUTTING_DOWN', 'the provider has been disposed');
    if (!this.settled) throw new SubagentError('RUN_STATE', `run ${this.id} is still running; only a settled run can be resumed`);
    if (this.localAgent.running) throw new SubagentError('RUN_STATE', `child ${this.id} is already running a continuation`);
    // A spent lifetime signal (the first run was cancelled) must not kill the continuation at
    // birth; such a continuation is then cancelled through dispose() or `options.signal`.
    const cancel = options.signal ?? (this.lifetime.aborted ? new AbortController().signal : this.lifetime);
    return new InProcessRun(this.localAgent, content, this.lifetime, this.tracker, cancel);
  }

  /** Cancels the run if it is still going and resolves once it has settled. Idempotent. */
  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      if (!this.settled) this.controller.abort();
      await this.result.catch(() => undefined);
    })();
    return this.disposing;
  }
}

/** A child restored from its log by a later daemon: already settled, and resumable. */
export class RestoredRun implements SubagentRun<ChildAgent> {
  readonly result: Promise<SubagentResult>;

  constructor(
    readonly localAgent: ChildAgent,
    result: SubagentResult,
    private readonly tracker: RunTracker,
  ) {
    this.result = Promise.resolve(result);
  }

  get id(): string {
    return this.localAgent.id;
  }

  async resume(content: ContentBlock[], options: ResumeOptions = {}): Promise<InProcessRun> {
    if (this.tracker.closed) throw new SubagentError('SHUTTING_DOWN', 'the provider has been disposed');
    if (this.localAgent.running) throw new SubagentError('RUN_STATE', `child ${this.id} is already running a continuation`);
    const signal = options.signal ?? new AbortController().signal;
    return new InProcessRun(this.localAgent, content, signal, this.tracker, signal);
  }

  async dispose(): Promise<void> {
    // Nothing runs: the child's resources are its log, which stays for inspection.
  }
}
