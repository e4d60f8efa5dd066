/**
 * One agent process speaking ACP with one session at a time: the handshake (spawn → initialize →
 * session/new), the ordered stream of session updates, and the prompt turns. The agent's
 * requests to us are answered in client-requests.ts. The runs of a resume chain share one
 * AcpSession; `AcpRun` decides which of them may dispose it.
 *
 * Two ways in. Cold (`open`): spawn for this request and run the whole handshake under one
 * `initializeTimeoutMs`. Warm (`warm`, then `adopt`): spawn and `initialize` ahead of any request
 * (warm-pool.ts), then bind the run's side and send `session/new` under a fresh bound. A warm
 * process is spawned without the request's env, in `config.cwd` or else the system temp dir,
 * since neither is known yet. `session/new` gets `config.cwd` when set (the agent's cwd, as the
 * reference has it), else the parent's cwd. `release` unbinds a finished session so a process whose agent is
 * declared reusable can take another.
 *
 * Over 400 lines on purpose: the handshake, the update stream and the turns share one process's
 * state and one ordering rule (updates belong to the turn that is open when they arrive).
 */
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as acp from '@agentclientprotocol/sdk';
import type { Logger } from 'pino';
import { SubagentError, boundDiagnostic, type ContentBlock } from '../../../protocol/index.js';
import type { ProviderStartRequest } from '../../provider.js';
import { readInitializeAnswer, readNewSessionAnswer, readPromptAnswer } from './acp-responses.js';
import type { AgentGroups } from './agent-groups.js';
import { AgentProcess } from './agent-process.js';
import { buildChildEnv, resolveCommand } from './child-env.js';
import { buildClientApp, type SessionBinding } from './client-requests.js';
import type { ResolvedAcpConfig } from './config.js';
import { hasImage, toAcpContent } from './content-mapping.js';
import { describeFailure } from './diagnostic.js';
import { agentStream, ProtocolViolation } from './nd-json-stream.js';
import type { StructuredOutput } from './structured-output.js';
import { Turn } from './turn.js';
import { within } from '../../../common/bounded-wait.js';
import { packageVersion } from '../../../common/package-info.js';
import { WorkspaceFs } from './workspace-fs.js';

/** How long a dead agent's stdout may stay open (a grandchild holding it) before we stop reading. */
const STDOUT_DRAIN_MS = 1_000;
/** How long a failure report waits for the exit status, so it can say how the agent ended. */
const EXIT_REPORT_WAIT_MS = 1_000;

class HandshakeTimeout extends Error {}
class HandshakeAborted extends Error {}

/** How much of an agent error's `data` a diagnostic quotes. */
const ERROR_DATA_BYTES = 1024;

/** An error as a diagnostic says it; an agent's JSON-RPC `data` often holds the real cause. */
function message(error: unknown): string {
  if (error instanceof acp.RequestError) {
    const data = error.data === undefined ? '' : `; data: ${boundDiagnostic(JSON.stringify(error.data) ?? String(error.data), ERROR_DATA_BYTES)}`;
    return `${error.message} (JSON-RPC error ${error.code}${data})`;
  }
  return error instanceof Error ? error.message : String(error);
}

function startFailed(text: string): SubagentError {
  return new SubagentError('START_FAILED', text);
}

export class AcpSession {
  /** Turns whose `session/prompt` the agent has not answered yet, oldest first (at most one in practice). */
  private readonly wireTurns: Turn[] = [];
  private readonly connection: acp.ClientConnection;
  private active: acp.ActiveSession | undefined;
  private id: string | undefined;
  private images = false;
  /** The handshake request in flight, for failure reports. */
  private step: 'initialize' | 'session/new' = 'initialize';
  private violation: ProtocolViolation | undefined;
  private closed = false;
  private deathDiagnostic: string | undefined;
  private disposal: Promise<void> | undefined;
  private idleWaiters: (() => void)[] = [];
  private binding: SessionBinding | undefined;
  /** `initialize` has been answered (and its protocol version accepted). */
  private initialized = false;

  private constructor(
    private readonly config: ResolvedAcpConfig,
    private readonly child: AgentProcess,
    private log: Logger,
  ) {
    const app = buildClientApp({
      config,
      log: () => this.log,
      binding: () => this.binding,
      sessionId: () => this.id,
      currentTurn: () => this.wireTurns[0],
    });
    this.connection = app.connect(agentStream(child.stdout, child.stdin, (violation) => this.onViolation(violation)));
    void this.connection.closed.then(() => this.onClosed());
    void child.exited.then(async () => {
      // Normally the SDK sees stdout end by itself; force it only if something keeps stdout open.
      if (!(await within(child.stdoutClosed, STDOUT_DRAIN_MS))) {
        this.connection.close(new Error('agent exited but its stdout stayed open'));
      }
    });
  }

  /**
   * The run's side of a session, checked before any process is touched: the parent's cwd must be
   * absolute, and file access is rooted there. Throws INVALID_REQUEST or START_FAILED.
   */
  static async bindingFor(config: ResolvedAcpConfig, request: ProviderStartRequest): Promise<SessionBinding> {
    const parentCwd = request.parent.cwd;
    if (!isAbsolute(parentCwd)) {
      throw new SubagentError('INVALID_REQUEST', 'parent.cwd must be an absolute path', { field: '/parent/cwd' });
    }
    await assertDirectory(parentCwd, "the parent's working directory");
    let fs: WorkspaceFs | undefined;
    if (config.fileAccess.read || config.fileAccess.write) {
      fs = await WorkspaceFs.open(parentCwd).catch((error: unknown) => {
        throw startFailed(`cannot root file access at ${parentCwd}: ${message(error)}`);
      });
    }
    return { fs, host: request.host, workspaceRoot: parentCwd };
  }

  /**
   * Cold: spawn the agent for this request and bring it to readiness (session created). On any
   * failure the process is killed and reaped before this rejects: START_FAILED, ABORTED, or
   * INVALID_REQUEST (an image prompt for an agent without image support).
   */
  static async open(
    config: ResolvedAcpConfig,
    request: ProviderStartRequest,
    binding: SessionBinding,
    log: Logger,
    groups?: AgentGroups,
  ): Promise<AcpSession> {
    const { signal } = request;
    if (signal.aborted) throw new SubagentError('ABORTED', 'start was cancelled before the agent was spawned');
    const parentCwd = binding.workspaceRoot;
    const cwd = config.cwd ?? parentCwd;
    if (config.cwd !== undefined) await assertDirectory(cwd, 'the configured cwd');
    const spawnedAt = performance.now();
    request.progress?.({ kind: 'agent', stage: 'spawning' });
    const session = await AcpSession.spawn(config, cwd, request.env, signal, log, groups);
    session.binding = binding;
    request.progress?.({ kind: 'agent', stage: 'initializing' });
    try {
      await session.handshake(async () => {
        await session.initializeStep(hasImage(request.prompt));
        await session.newSessionStep(cwd);
      }, signal);
    } catch (error) {
      throw await session.abandon(error);
    }
    session.log.debug({ readyMs: Math.round(performance.now() - spawnedAt), sessionId: session.id }, 'acp agent ready');
    return session;
  }

  /**
   * Warm: spawn and `initialize` ahead of any request. Rejects (process reaped) with START_FAILED,
   * or ABORTED when `signal` (the pool closing) fires first.
   */
  static async warm(config: ResolvedAcpConfig, signal: AbortSignal, log: Logger, groups?: AgentGroups): Promise<AcpSession> {
    const session = await AcpSession.spawn(config, config.cwd ?? tmpdir(), undefined, signal, log, groups);
    try {
      await session.handshake(() => session.initializeStep(false), signal);
    } catch (error) {
      throw await session.abandon(error);
    }
    return session;
  }

  /**
   * Give a warm (initialized, unbound) session to a run: bind the run's side and create its ACP
   * session. On failure the process is killed and reaped, as in `open`.
   */
  async adopt(request: ProviderStartRequest, binding: SessionBinding, log: Logger): Promise<void> {
    if (!this.initialized || this.binding || this.id !== undefined) throw new Error('only an initialized, unbound session can be adopted');
    this.log = log.child({ pid: this.pid });
    this.binding = binding;
    const takenAt = performance.now();
    try {
      if (hasImage(request.prompt) && !this.images) {
        throw new SubagentError('INVALID_REQUEST', 'the prompt has image content but the agent does not accept images', { field: '/prompt' });
      }
      if (this.unavailable) throw new Error(this.unavailable);
      await this.handshake(() => this.newSessionStep(this.config.cwd ?? binding.workspaceRoot), request.signal);
    } catch (error) {
      throw await this.abandon(error);
    }
    this.log.debug({ readyMs: Math.round(performance.now() - takenAt), sessionId: this.id }, 'warm acp agent taken');
  }

  /**
   * Unbind a finished session so the process can serve another: only when no prompt is still
   * unanswered and the process is healthy. Returns whether it was released.
   */
  release(): boolean {
    if (this.wireTurns.length > 0 || this.unavailable || !this.initialized) return false;
    const active = this.active;
    this.active = undefined;
    this.id = undefined;
    this.binding = undefined;
    active?.dispose(); // ends its pump (see `pump`)
    return true;
  }

  private static async spawn(
    config: ResolvedAcpConfig,
    cwd: string,
    requestEnv: ProviderStartRequest['env'],
    signal: AbortSignal,
    log: Logger,
    groups: AgentGroups | undefined,
  ): Promise<AcpSession> {
    // Look the command up without the request's env: a client must not choose the binary.
    const searchPath = buildChildEnv(process.env, config.env, undefined)['PATH'];
    const command = await resolveCommand(config.command, searchPath, cwd);
    if (command === undefined) {
      throw startFailed(`agent command ${JSON.stringify(config.command)} was not found or is not executable (PATH=${searchPath ?? ''})`);
    }
    if (signal.aborted) throw new SubagentError('ABORTED', 'start was cancelled before the agent was spawned');
    let agentProcess: AgentProcess;
    try {
      agentProcess = await AgentProcess.spawn({
        command,
        args: config.args,
        cwd,
        env: buildChildEnv(process.env, config.env, requestEnv),
        log,
        ...(groups && { groups }),
      });
    } catch (error) {
      throw startFailed(`could not spawn agent ${JSON.stringify(command)}: ${message(error)}`);
    }
    return new AcpSession(config, agentProcess, log.child({ pid: agentProcess.pid }));
  }

  get sessionId(): string {
    if (this.id === undefined) throw new Error('session not created');
    return this.id;
  }

  get pid(): number {
    return this.child.pid;
  }

  get acceptsImages(): boolean {
    return this.images;
  }

  /** Resolves when the agent process has exited (for whatever reason). */
  get exited(): Promise<unknown> {
    return this.child.exited;
  }

  /** Why the session can take no more prompts, or undefined while it can. */
  get unavailable(): string | undefined {
    if (this.disposal) return 'the agent process was disposed';
    if (this.deathDiagnostic) return this.deathDiagnostic;
    if (this.closed || this.child.exitStatus) return 'the agent process has exited';
    return undefined;
  }

  /**
   * Send one prompt turn. Updates are folded into the returned turn until the agent answers;
   * `signal` aborting cancels it (settles `aborted` at once and sends `session/cancel`).
   */
  startTurn(content: readonly ContentBlock[], signal: AbortSignal, structured: StructuredOutput | undefined): Turn {
    let sent = false;
    const host = this.requireBinding().host;
    const turn = new Turn({
      emit: (event) => host.emit(event),
      structured,
      ...(host.maxOutputBytes !== undefined && { maxOutputBytes: host.maxOutputBytes }),
      onCancel: () => {
        if (sent) this.sendCancel();
      },
    });
    const unavailable = this.unavailable;
    if (unavailable) {
      turn.fail(unavailable);
      return turn;
    }
    if (signal.aborted) {
      turn.cancel();
      return turn;
    }
    const active = this.requireActive();
    const prompt = toAcpContent(content);
    if (structured) prompt.push({ type: 'text', text: structured.instruction });
    this.wireTurns.push(turn);
    sent = true;
    // The answer arrives through the pump, in order after the turn's updates.
    active.prompt(prompt).catch(() => {});
    const onAbort = (): void => turn.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    void turn.result.then(() => signal.removeEventListener('abort', onAbort));
    return turn;
  }

  /** Resolves when the agent has answered every prompt sent (a cancelled turn's answer included). */
  async whenIdle(timeoutMs: number): Promise<void> {
    if (this.wireTurns.length === 0 || this.unavailable) return;
    const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    if (!(await within(idle, timeoutMs))) {
      throw new SubagentError('RUN_STATE', `the agent has not answered the previous prompt within ${timeoutMs} ms`);
    }
  }

  /**
   * Cancel what runs, then close stdin → SIGTERM → SIGKILL, and reap. Idempotent. An agent with
   * no prompt in flight gets only `idleStdin` after EOF: it has no turn to finish, and agents that
   * ignore EOF (codex-acp, claude-agent-acp) would otherwise hold every dispose for the full grace.
   */
  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      const { stdin, term, idleStdin } = this.config.disposeGraceMs;
      const inFlight = this.wireTurns.length > 0;
      for (const turn of this.wireTurns) turn.cancel();
      await this.child.terminate({ stdin: inFlight ? stdin : Math.min(stdin, idleStdin), term });
      this.connection.close(new Error('disposed'));
      this.active?.dispose();
      this.log.debug({ exit: this.child.exitStatus }, 'acp agent disposed');
    })();
    return this.disposal;
  }

  private async initializeStep(needsImages: boolean): Promise<void> {
    this.step = 'initialize';
    const init = await this.connection.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {
        fs: { readTextFile: this.config.fileAccess.read, writeTextFile: this.config.fileAccess.write },
        terminal: false,
      },
      clientInfo: { name: 'subagentd', version: packageVersion() },
    });
    const answer = readInitializeAnswer(init);
    if (answer.protocolVersion !== acp.PROTOCOL_VERSION) {
      throw new Error(`agent answered with ACP protocol version ${answer.protocolVersion}; this client speaks ${acp.PROTOCOL_VERSION}`);
    }
    this.images = answer.images;
    this.initialized = true;
    if (needsImages && !this.images) {
      throw new SubagentError('INVALID_REQUEST', 'the prompt has image content but the agent does not accept images', {
        field: '/prompt',
      });
    }
  }

  private async newSessionStep(cwd: string): Promise<void> {
    this.step = 'session/new';
    const active = await this.connection.agent.buildSession({ cwd, mcpServers: [] }).start();
    this.active = active;
    this.id = readNewSessionAnswer(active.newSessionResponse);
    void this.pump(active);
  }

  /** Run handshake steps under `initializeTimeoutMs`; `signal` aborting wins as ABORTED. */
  private async handshake(steps: () => Promise<void>, signal: AbortSignal): Promise<void> {
    let onAbort: (() => void) | undefined;
    const timer = new AbortController();
    try {
      await Promise.race([
        steps(),
        sleep(this.config.initializeTimeoutMs, undefined, { signal: timer.signal }).then(
          () => Promise.reject(new HandshakeTimeout()),
          () => undefined,
        ),
        new Promise<never>((_, reject) => {
          onAbort = () => reject(new HandshakeAborted());
          signal.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } finally {
      timer.abort();
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) throw new HandshakeAborted();
  }

  /** Kill and reap a session that never became ready, and say why as a SubagentError. */
  private async abandon(error: unknown): Promise<SubagentError> {
    this.connection.close(error instanceof Error ? error : new Error(String(error)));
    await this.child.terminate({ stdin: 0, term: this.config.disposeGraceMs.term });
    if (error instanceof HandshakeAborted) return new SubagentError('ABORTED', 'start was cancelled before the agent was ready');
    if (error instanceof SubagentError) return error;
    const reason =
      error instanceof HandshakeTimeout
        ? `agent "${this.config.name}" was not ready within ${this.config.initializeTimeoutMs} ms (no answer to ${this.step}); raise the provider's initializeTimeoutMs if it is only slow to start`
        : `agent "${this.config.name}" failed during ${this.step}: ${this.violation?.message ?? message(error)}`;
    return startFailed(describeFailure(reason, this.child.describeExit(), await this.child.finalStderrTail()));
  }

  /**
   * Apply session updates and prompt answers strictly in arrival order. The SDK's active
   * session queues both in one FIFO, so a turn never ends before its last chunk is applied.
   */
  private async pump(active: acp.ActiveSession): Promise<void> {
    for (;;) {
      let next: acp.ActiveSessionMessage;
      try {
        next = await active.nextUpdate();
      } catch (error) {
        if (this.closed || this.connection.signal.aborted || this.disposal) return; // onClosed fails the turns
        if (this.active !== active) return; // released: this session is over
        this.wireTurns.shift()?.fail(`agent answered session/prompt with an error: ${message(error)}`);
        this.notifyIfIdle();
        continue;
      }
      if (next.kind === 'session_update') {
        // Updates outside a turn (e.g. available commands after session/new) have no run to go to.
        this.wireTurns[0]?.applyUpdate(next.update);
      } else {
        const turn = this.wireTurns.shift();
        try {
          turn?.finish(readPromptAnswer(next.response));
        } catch (error) {
          turn?.fail(`agent "${this.config.name}" answered session/prompt malformed: ${message(error)}`);
        }
        this.notifyIfIdle();
      }
    }
  }

  private notifyIfIdle(): void {
    if (this.wireTurns.length > 0) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private requireBinding(): SessionBinding {
    if (!this.binding) throw new Error('no run is bound to this session');
    return this.binding;
  }

  private requireActive(): acp.ActiveSession {
    if (!this.active) throw new Error('session not created');
    return this.active;
  }

  private sendCancel(): void {
    if (this.id === undefined || this.unavailable) return;
    this.connection.agent.notify(acp.methods.agent.session.cancel, { sessionId: this.id }).catch(() => {});
  }

  private onViolation(violation: ProtocolViolation): void {
    this.violation ??= violation;
    this.log.warn({ err: violation }, 'acp agent broke the protocol; stopping it');
    this.connection.close(violation);
    void this.child.terminate({ stdin: 0, term: this.config.disposeGraceMs.term });
  }

  /** The connection is gone: fail what still waits on the agent, saying how the agent ended. */
  private async onClosed(): Promise<void> {
    this.closed = true;
    if (this.disposal) {
      // Disposal cancelled these turns already; nothing will answer them now.
      this.wireTurns.splice(0);
      this.notifyIfIdle();
      return;
    }
    const reason = this.violation?.message ?? "the agent's ACP connection closed";
    await within(this.child.exited, EXIT_REPORT_WAIT_MS);
    const exit = this.child.describeExit();
    // An agent that closed its protocol channel but lives on is of no further use.
    if (!exit) void this.child.terminate({ stdin: 0, term: this.config.disposeGraceMs.term });
    this.deathDiagnostic = describeFailure(
      reason,
      exit ?? `agent (pid ${this.child.pid}) was still running and is being stopped`,
      await this.child.finalStderrTail(),
    );
    for (const turn of this.wireTurns.splice(0)) turn.fail(this.deathDiagnostic);
    this.notifyIfIdle();
  }
}

async function assertDirectory(path: string, what: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (!info?.isDirectory()) throw startFailed(`${what} ${path} is not an existing directory`);
}
