/**
 * Per-run hosting: the RunHost a provider's child talks to (client tools, permission prompts,
 * streamed events), routed to whichever connection owns the run now, and the one rule that
 * orders a run's messages to its owner:
 *
 *   a run's events and its end reach the owner only after the answer that hands the run over
 *   (the start or resume reply): behind it in the connection's outgoing order.
 *
 * The host is created closed. Until `answered()`, admitted events are held in order, tool calls
 * and permission prompts wait (the owner would not know the run id), and the settle waits
 * (`afterAnswer`); `answered()` sends what was held, then lets the settle through.
 * The service opens it when the caller's StartAnswer reports the reply queued, or at once when the
 * caller takes the answer as a return value. A resumption re-arms the same host (`rearm`): a
 * provider keeps the chain's first host for the child's whole life.
 *
 * Failures: a tool call to an owner that is gone rejects; a permission prompt with no owner is
 * cancelled; events beyond the run's stream budget are cut (output-budget.ts).
 */
import type { Logger } from 'pino';
import type { PermissionParams, PermissionResult, RunEvent, ToolCallResult } from '../../protocol/index.js';
import type { Requester, RunHost } from '../provider.js';
import type { RunBudget } from '../upstream/token-budgets.js';
import { StreamBudget } from './output-budget.js';
import type { RunOwner } from './run-ownership.js';
import type { RunObservers } from './run-observer.js';

export class OwnedRunHost implements RunHost {
  /** This run's share of the event stream; a resume gets a fresh one. */
  budget: StreamBudget;
  private isAnswered = false;
  /** Events admitted before the answer went out (allocated only if one comes that early). */
  private held: RunEvent[] | undefined;
  private pendingSettle: (() => void) | undefined;
  /** Tool calls and permission prompts made before the answer, resumed when it is out. */
  private waiting: Array<() => void> | undefined;
  private runLog: Logger | undefined;
  /** Its owner is across a wire: nobody steers the run in the turn its start returns. */
  readonly steersInTurn = false;
  /** The service's run observers (run-observer.ts): they hear every event, streamed or not. */
  observers: RunObservers | undefined;
  /** Set by the service at start: the client and lineage the run's model requests count for. */
  requester: Requester | undefined;
  /** Set by the service at start when token budgets are configured. */
  tokenBudget: RunBudget | undefined;

  constructor(
    public runId: string,
    public owner: RunOwner,
    public stream: boolean,
    private readonly serviceLog: Logger,
    private readonly provider: string,
    readonly maxOutputBytes: number,
  ) {
    this.budget = new StreamBudget(maxOutputBytes);
  }

  /** Made on first use: most runs never log, and a pino child per start is measurable. */
  get log(): Logger {
    return (this.runLog ??= this.serviceLog.child({ runId: this.runId, provider: this.provider }));
  }

  /** Points the host at the next run of the same child, closed until that run is answered. */
  rearm(runId: string, owner: RunOwner, stream: boolean): void {
    this.runId = runId;
    this.owner = owner;
    this.stream = stream;
    this.budget = new StreamBudget(this.maxOutputBytes);
    this.isAnswered = false;
    this.held = undefined;
    this.pendingSettle = undefined;
  }

  callTool(call: { callId: string; name: string; arguments: unknown }, signal: AbortSignal): Promise<ToolCallResult> {
    if (!this.isAnswered) return this.whenAnswered().then(() => this.callTool(call, signal));
    if (!this.owner.open) return Promise.reject(new Error('the client that hosts this tool has disconnected'));
    return this.owner.callTool({ runId: this.runId, ...call }, signal);
  }

  askPermission(request: Omit<PermissionParams, 'runId'>, signal: AbortSignal): Promise<PermissionResult> {
    if (!this.isAnswered) return this.whenAnswered().then(() => this.askPermission(request, signal));
    if (!this.owner.open) return Promise.resolve({ outcome: 'cancelled' });
    return this.owner.askPermission({ runId: this.runId, ...request }, signal);
  }

  emit(event: RunEvent): void {
    this.observers?.event(this.runId, event);
    if (!this.stream || !this.owner.open) return;
    const admitted = this.budget.admit(event);
    if (!admitted) return;
    if (this.isAnswered) this.owner.notifyRunEvent({ runId: this.runId, event: admitted });
    else (this.held ??= []).push(admitted);
  }

  /** A tool call or prompt made before the answer: the owner cannot know the run id yet. */
  private whenAnswered(): Promise<void> {
    return new Promise((resolve) => (this.waiting ??= []).push(resolve));
  }

  /** Runs `settle` now if the run was answered, else right after it is. */
  afterAnswer(settle: () => void): void {
    if (this.isAnswered) settle();
    else this.pendingSettle = settle;
  }

  /** The answer is out: what was held goes first, then the settle. */
  answered(): void {
    if (this.isAnswered) return;
    this.isAnswered = true;
    const held = this.held;
    this.held = undefined;
    if (held && this.owner.open) for (const event of held) this.owner.notifyRunEvent({ runId: this.runId, event });
    const waiting = this.waiting;
    this.waiting = undefined;
    for (const resume of waiting ?? []) resume();
    const settle = this.pendingSettle;
    this.pendingSettle = undefined;
    settle?.();
  }
}
