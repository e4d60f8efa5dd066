/**
 * Run handles over a shared agent session.
 *
 * Ownership: the runs of one resume chain share one agent process and ACP session. Exactly one
 * run — the latest in the chain — owns the process: `resume()` on the owner returns a fresh run
 * and hands ownership to it. Disposing the owner kills the process; disposing an earlier run
 * only retires that handle. So the caller's rule stays the seam's: dispose every run, and the
 * process ends with the last one. (The provider decides what "ends" means: by default the process
 * is killed; a process whose agent is declared reusable may go back to the warm pool.)
 */
import { randomUUID } from 'node:crypto';
import { SubagentError, type ContentBlock, type SubagentResult } from '../../../protocol/index.js';
import type { DaemonRun } from '../../provider.js';
import type { AcpSession } from './acp-session.js';
import { hasImage } from './content-mapping.js';
import type { StructuredOutput } from './structured-output.js';
import type { Turn } from './turn.js';

export interface AcpResumeOptions {
  /**
   * Cancellation channel of the continuation. Default: the start request's signal, which
   * therefore cancels whichever turn of the chain is running.
   */
  readonly signal?: AbortSignal;
}

interface Chain {
  readonly session: AcpSession;
  readonly signal: AbortSignal;
  readonly structured: StructuredOutput | undefined;
  /** Bound on waiting for the agent to answer a cancelled turn before a resume. */
  readonly idleTimeoutMs: number;
  /** Called once, when the chain's owner is disposed: ends (or recycles) the session. */
  readonly end: (session: AcpSession) => Promise<void>;
  owner: AcpRun | undefined;
}

export class AcpRun implements DaemonRun {
  /** Minted here: agent session ids are only unique per agent process. */
  readonly id = `acp-${randomUUID()}`;
  readonly localAgent = undefined;
  readonly result: Promise<SubagentResult>;
  private disposal: Promise<void> | undefined;
  private resuming = false;

  private constructor(
    private readonly chain: Chain,
    private readonly turn: Turn,
  ) {
    this.result = turn.result;
  }

  /** The first run of a chain: sends the start request's prompt. */
  static begin(
    session: AcpSession,
    prompt: readonly ContentBlock[],
    signal: AbortSignal,
    structured: StructuredOutput | undefined,
    idleTimeoutMs: number,
    end: (session: AcpSession) => Promise<void> = (s) => s.dispose(),
  ): AcpRun {
    const chain: Chain = { session, signal, structured, idleTimeoutMs, end, owner: undefined };
    const run = new AcpRun(chain, session.startTurn(prompt, signal, structured));
    chain.owner = run;
    return run;
  }

  /** The agent's process id: which process served the run (the warm-pool tests read it). */
  get pid(): number {
    return this.chain.session.pid;
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      this.turn.cancel();
      if (this.chain.owner === this) {
        this.chain.owner = undefined;
        await this.chain.end(this.chain.session);
      }
    })();
    return this.disposal;
  }

  /**
   * Another `session/prompt` on the same agent session, as a fresh run that takes over the
   * process. Only the latest run of a chain, once settled and not disposed, can be resumed.
   */
  async resume(content: ContentBlock[], options: AcpResumeOptions = {}): Promise<AcpRun> {
    const { chain } = this;
    if (this.disposal) throw new SubagentError('RUN_STATE', 'the run is disposed');
    if (chain.owner !== this) throw new SubagentError('RUN_STATE', 'only the latest run of a resume chain can be resumed');
    if (this.resuming) throw new SubagentError('RUN_STATE', 'a resume of this run is already in progress');
    if (!this.turn.settled) throw new SubagentError('RUN_STATE', 'the run has not settled yet');
    const signal = options.signal ?? chain.signal;
    if (signal.aborted) throw new SubagentError('ABORTED', 'resume was cancelled before the prompt was sent');
    if (hasImage(content) && !chain.session.acceptsImages) {
      throw new SubagentError('INVALID_REQUEST', 'the prompt has image content but the agent does not accept images', { field: '/prompt' });
    }
    this.resuming = true;
    try {
      // A cancelled turn settled locally; the agent must answer it before it takes a new prompt.
      await chain.session.whenIdle(chain.idleTimeoutMs);
      const unavailable = chain.session.unavailable;
      if (this.disposal || chain.owner !== this) throw new SubagentError('RUN_STATE', 'the run was disposed while resuming');
      if (unavailable) throw new SubagentError('RUN_STATE', `cannot resume: ${unavailable}`);
      if (signal.aborted) throw new SubagentError('ABORTED', 'resume was cancelled before the prompt was sent');
      const next = new AcpRun(chain, chain.session.startTurn(content, signal, chain.structured));
      chain.owner = next;
      return next;
    } finally {
      this.resuming = false;
    }
  }
}
