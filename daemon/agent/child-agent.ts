/**
 * A child agent: its session (header + append-only log), the model and tools it was created
 * with, and its steering queue. It runs one turn at a time; each `run` is one prompt (the first
 * task or a resumption) and resolves with that run's result, read from the events it appended.
 * The object is the in-process provider's `localAgent`; `header` and `events` are what
 * inspection reads.
 */
import type { Logger } from 'pino';
import { SubagentError, type ContentBlock, type SessionEvent, type SessionHeader, type SubagentResult } from '../../protocol/index.js';
import type { RunHost } from '../provider.js';
import { runTurn } from './agent-loop.js';
import type { ResolvedModel } from './model/model-adapter.js';
import { buildRunResult } from './run-result.js';
import { SessionLog } from '../store/session-log.js';
import { SteeringQueue } from './steering-queue.js';
import type { StructuredCapture } from './tools/structured-output.js';
import type { ToolRegistry } from './tools/tool-registry.js';

export interface ChildAgentConfig {
  readonly sessionsDir: string;
  readonly header: SessionHeader;
  /** A fork's seed (the parent's completed turns); it goes first in the log. */
  readonly seed: readonly SessionEvent[];
  readonly model: ResolvedModel;
  readonly system: string;
  readonly tools: ToolRegistry;
  readonly structured?: StructuredCapture;
  readonly maxSteps: number;
  /** The owning client's services for the child's whole life (resumptions included). */
  readonly host: RunHost;
  readonly log: Logger;
}

export class ChildAgent {
  private readonly steering = new SteeringQueue();
  private busy = false;
  private stopAfterStep = false;

  private constructor(
    private readonly config: ChildAgentConfig,
    private readonly session: SessionLog,
    /** How many events came from the seed: the child's own events start here. */
    readonly seedLength: number,
  ) {}

  /** Publishes the child: its session file exists (header and seed synced) once this resolves. */
  static async create(config: ChildAgentConfig): Promise<ChildAgent> {
    const session = await SessionLog.create(config.sessionsDir, config.header, config.seed);
    return new ChildAgent(config, session, config.seed.length);
  }

  /** A child from an existing session log (a previous daemon ran it): everything it did counts as seed. */
  static restore(config: ChildAgentConfig, session: SessionLog): ChildAgent {
    return new ChildAgent(config, session, session.events.length);
  }

  get id(): string {
    return this.config.header.id;
  }

  get header(): SessionHeader {
    return this.session.header;
  }

  get events(): readonly SessionEvent[] {
    return this.session.events;
  }

  /** Whether a run is in progress. */
  get running(): boolean {
    return this.busy;
  }

  /** Asks the running turn to end at its next step boundary (an `after-step` interrupt); no-op when idle. */
  interruptAfterStep(): void {
    if (this.busy) this.stopAfterStep = true;
  }

  /** Queues content for the running turn's next step boundary; RUN_STATE when no turn runs. */
  steer(content: ContentBlock[]): void {
    this.steering.push(content);
  }

  /**
   * Runs one turn for `prompt` and resolves with its result. Child-level failures resolve (with
   * a non-completed stop reason); only a session-log failure rejects.
   */
  async run(prompt: ContentBlock[], signal: AbortSignal): Promise<SubagentResult> {
    if (this.busy) throw new SubagentError('RUN_STATE', `child ${this.id} is already running`);
    this.busy = true;
    this.stopAfterStep = false;
    // Open for steering now: a message sent right after start is folded in before the first step.
    this.steering.open();
    const { host, structured } = this.config;
    structured?.reset();
    const from = this.session.events.length;
    let ended = false;
    try {
      // The first step waits one macrotask so that whoever just received this run (the caller
      // of start or resume, in-process) can steer it before the model is first asked: a message
      // sent in the same turn as the start is part of the first step. A caller across a wire
      // cannot (RunHost.steersInTurn): its child steps at once, and its first model request or
      // tool call is under way while the service answers the start. Not an ordering of messages
      // to the owner: the service's host holds events and the end until the start is answered
      // (daemon/service/run-hosting.ts).
      if (host.steersInTurn !== false) await new Promise<void>((resolve) => setImmediate(resolve));
      const outcome = await runTurn(
        {
          session: this.session,
          model: this.config.model,
          system: this.config.system,
          tools: this.config.tools,
          steering: this.steering,
          maxSteps: this.config.maxSteps,
          signal,
          emit: (event) => host.emit(event),
          ...(host.maxOutputBytes !== undefined && { maxOutputBytes: host.maxOutputBytes }),
          captured: () => structured?.captured ?? false,
          stopRequested: () => this.stopAfterStep,
          log: this.config.log,
          ...(host.requester && { requester: host.requester }),
          ...(host.tokenBudget && { tokenBudget: host.tokenBudget }),
        },
        prompt,
      );
      this.config.log.debug({ reason: outcome.reason }, 'turn ended');
      const result = buildRunResult({
        events: this.session.events.slice(from),
        cancelled: signal.aborted,
        partialText: outcome.partialText,
        ...(structured && { structured }),
      });
      ended = true;
      return result;
    } finally {
      this.busy = false;
      this.steering.close(); // already closed by a normal turn end; this covers a log failure
      // Between runs the file handle is released; a resumption reopens it. A turn that ended
      // has its log written and synced (its end's flush), so its result does not wait for the
      // close, a thread-pool round trip: a close that fails then is logged. After a failure
      // the close is awaited, and re-throws the log's write failure.
      if (ended) this.session.close().catch((error: unknown) => this.config.log.warn({ err: error }, 'closing the session log failed'));
      else await this.session.close();
    }
  }

  /** Deletes the session of a child that was never handed out (start cancelled before readiness). */
  async discard(): Promise<void> {
    await this.session.discard();
  }
}
