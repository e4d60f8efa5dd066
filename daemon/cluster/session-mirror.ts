/**
 * Copies an executing child's session into the cluster's session stream as it grows, so that a
 * member taking the run over finds every line published before this member died. Line 0 is
 * the header, line i the (i-1)th event. Publishing is serialized and coalesced: `schedule()`
 * after each run event asks for one sync within `delayMs`; `sync()` publishes everything new
 * and resolves when the server has it (the executor awaits it before recording an outcome).
 *
 * A child that exposes no session (an ACP agent) mirrors nothing: it cannot be resumed anyway.
 */
import type { SessionEvent, SessionHeader } from '../../protocol/index.js';
import type { SessionEvents } from './session-events.js';

interface SessionView {
  readonly header: SessionHeader;
  readonly events: readonly SessionEvent[];
}

export class SessionMirror {
  private chain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private readonly session: SessionView | undefined;

  constructor(
    private readonly sessions: SessionEvents,
    private readonly runId: string,
    agent: unknown,
    /** Lines already stored (a takeover continues after them). */
    private stored = 0,
    private readonly delayMs = 50,
  ) {
    this.session = sessionOf(agent);
  }

  /** Lines the server has (or is being sent): where a continuation of the child goes on from. */
  get published(): number {
    return this.stored;
  }

  schedule(): void {
    if (!this.session || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.sync().catch(() => undefined);
    }, this.delayMs);
    this.timer.unref();
  }

  sync(): Promise<void> {
    const session = this.session;
    if (!session) return Promise.resolve();
    // After a failed sync (NATS away) the next one starts again from the last stored line.
    this.chain = this.chain.catch(() => undefined).then(async () => {
      const total = 1 + session.events.length;
      // Published back to back on one connection: the server stores them in this order.
      const appends: Promise<void>[] = [];
      for (let line = this.stored; line < total; line++) appends.push(this.sessions.append(this.runId, line, line === 0 ? session.header : session.events[line - 1]));
      await Promise.all(appends);
      this.stored = total;
    });
    return this.chain;
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}

function sessionOf(agent: unknown): SessionView | undefined {
  if (typeof agent !== 'object' || agent === null) return undefined;
  const candidate = agent as { header?: unknown; events?: unknown };
  if (typeof candidate.header !== 'object' || !Array.isArray(candidate.events)) return undefined;
  return candidate as SessionView;
}
