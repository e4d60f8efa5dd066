/**
 * The service's connection of the moment, and the reconnect state machine behind it:
 *
 *   connected ──lost──▶ reconnecting ──re-dialled, runs re-attached──▶ connected (`reconnected`)
 *                           │
 *                           └──maxAttempts failed, or another major protocol──▶ given up
 *
 * `close()` ends it from any state. Without a reconnect policy (or before the service was
 * handed out), a loss is final at once: every unsettled run rejects with the loss.
 *
 * Rules: only the current connection's loss counts; a loss while re-attaching makes the running
 * reconnect dial again rather than start a second one; while reconnecting, new calls reject with
 * DAEMON_UNAVAILABLE and runs keep waiting; after giving up, everything rejects with one error
 * naming the connection and the number of attempts. Settled runs not yet disposed are kept and
 * re-attached too, so that their `dispose` and `resume` reach the next connection.
 */
import { AttachRequest, SubagentError, WaitRequest, endEventOf, type AttachResult, type InitializeResult } from '../protocol/index.js';
import type { EventHub } from './event-hub.js';
import { handshake, type ClientInfo } from './handshake.js';
import { backoffDelay, Pause, type ReconnectPolicy } from './reconnect.js';
import type { RpcChannel } from './rpc-channel.js';
import type { RunRecord } from './run-record.js';
import type { RunTable } from './run-table.js';
import type { ClientLogger } from './types.js';

/** How a service gets a new connection: `dial` opens one (not yet listening) and says which token to present. */
export interface ReconnectSetup {
  readonly policy: ReconnectPolicy;
  readonly dial: () => Promise<{ readonly channel: RpcChannel; readonly token?: string }>;
}

/** What the reconnect needs of the service it serves. */
export interface ReconnectHost {
  readonly setup: ReconnectSetup | undefined;
  readonly clientInfo: ClientInfo;
  readonly requestTimeoutMs: number | undefined;
  readonly runs: RunTable;
  readonly events: EventHub;
  readonly logger: ClientLogger;
  /** The epoch of the daemon the service was handed out for; undefined before (nothing to reconnect). */
  epoch(): string | undefined;
  /** Register the service's handlers on a new connection (before it listens). */
  listenTo(channel: RpcChannel): void;
  /** Take in a new connection's `initialize` answer (identity, providers). */
  adopt(answer: InitializeResult): void;
  /** Subscribe the continuable children again on the new connection, once the runs are re-attached. */
  reattachChildren(channel: RpcChannel): void;
  /** Send a run's cancel on `channel` (a cancel asked for while there was none). */
  sendCancel(channel: RpcChannel, record: RunRecord): void;
}

/** Bounds `initialize` and `run/attach` while reconnecting when no `requestTimeoutMs` is set. */
const REATTACH_TIMEOUT_MS = 10_000;

export class ReconnectingConnection {
  private current: RpcChannel;
  /** `close()` was called: a loss is final, whatever the policy. */
  private closing = false;
  /** Set from a loss until `reconnected` (or giving up): the loss it recovers from. */
  private reconnecting: SubagentError | undefined;
  /** What waits for the reconnect under way to end (a start to send again: start-retry.ts). */
  private readonly recoveryWaiters = new Set<() => void>();
  /** Set once reconnecting gave up: what every later call rejects with. */
  private finalError: SubagentError | undefined;
  private readonly pause = new Pause();
  /** A re-dialled connection still in its handshake; `close()` closes it too. */
  private dialling: RpcChannel | undefined;
  /** Settled runs not yet disposed, by run id (kept only with a reconnect policy). */
  private readonly retained = new Map<string, RunRecord>();

  constructor(
    channel: RpcChannel,
    private readonly host: ReconnectHost,
  ) {
    this.current = channel;
    channel.onLost((error) => this.lost(channel, error));
  }

  /** The connection calls go to now (replaced when a reconnect succeeds). */
  get channel(): RpcChannel {
    return this.current;
  }

  /** True while a reconnect is under way: sends wait for the re-attach instead of failing. */
  get recovering(): boolean {
    return this.reconnecting !== undefined && !this.closing;
  }

  /** What new calls reject with while there is no usable connection, else undefined. */
  unavailable(): SubagentError | undefined {
    if (this.finalError) return this.finalError;
    if (this.recovering) return this.reestablishing(this.reconnecting!);
    const gone = this.current.gone;
    // Going (its last answers still drain, a turn or so) with a reconnect to follow: the same
    // answer as once it began, not the bare loss (a call in that window used to get the latter).
    if (gone && this.reconnectsLater() && this.host.epoch() !== undefined) return this.reestablishing(gone);
    return gone;
  }

  private reestablishing(cause: SubagentError): SubagentError {
    return new SubagentError(
      'DAEMON_UNAVAILABLE',
      `the connection to ${this.current.describe()} is being re-established; calls work again after the 'reconnected' event (${cause.message})`,
    );
  }

  /** A call failed because the connection went, and a reconnect is under way (or about to be). */
  mayRecover(error: unknown): boolean {
    return this.reconnectsLater() && error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE';
  }

  /** A loss will be (or is being) recovered from: there is a policy, no close, no giving up. */
  reconnectsLater(): boolean {
    return this.host.setup !== undefined && !this.closing && this.finalError === undefined;
  }

  /** With a policy, keep `record` once settled, until it is disposed, to re-attach it after a loss. */
  retainOnceSettled(record: RunRecord): void {
    if (!this.host.setup) return;
    record.onSettled(() => {
      if (!record.disposed && !this.closing && this.finalError === undefined) this.retained.set(record.runId, record);
    });
  }

  /** The run was disposed: nothing of it is left to re-attach. */
  forget(runId: string): void {
    this.retained.delete(runId);
  }

  /** `run/attach`: take a run back by its token on `channel`. */
  attach(channel: RpcChannel, record: Pick<RunRecord, 'runId' | 'runToken'> & { readonly onEvent?: unknown }): Promise<AttachResult> {
    return channel.request(
      AttachRequest,
      // A run with an event handler asks for its events again: a daemon that continued it after
      // a restart cannot know the original start streamed.
      { runId: record.runId, runToken: record.runToken, ...(record.onEvent !== undefined && { stream: true }) },
      { timeoutMs: this.host.requestTimeoutMs ?? REATTACH_TIMEOUT_MS },
    );
  }

  /** Resolves once the reconnect under way has ended, either way (at once when there is none). */
  recovered(): Promise<void> {
    if (!this.recovering) return Promise.resolve();
    return new Promise((resolve) => this.recoveryWaiters.add(resolve));
  }

  private endRecovery(): void {
    for (const wake of this.recoveryWaiters) wake();
    this.recoveryWaiters.clear();
  }

  /** The service was never handed out: a loss from here on is nobody's to recover. */
  abandon(): void {
    this.closing = true;
    this.pause.interrupt();
    this.endRecovery();
  }

  /** Close the connection (and any re-dial in its handshake); unsettled runs reject. */
  async close(): Promise<void> {
    this.abandon();
    const channel = this.current;
    await Promise.all([channel.close(), this.dialling?.close()]);
    // A channel lost earlier (we were reconnecting) no longer reports; fail what still waits.
    const closed = new SubagentError('DAEMON_UNAVAILABLE', `the connection to ${channel.describe()} is gone (closed by this client)`);
    for (const record of this.host.runs.drain()) record.fail(closed);
    this.retained.clear();
  }

  /** Every connection's loss reaches here; only the current connection's counts. */
  private lost(channel: RpcChannel, error: SubagentError): void {
    if (channel !== this.current) return;
    const setup = this.host.setup;
    // Reconnecting needs a service that was handed out (initialized) and is not being closed.
    if (this.closing || !setup || this.host.epoch() === undefined) {
      for (const record of this.host.runs.drain()) record.fail(error);
      this.retained.clear();
      if (!this.closing) this.host.events.emit('disconnected', { error, reconnecting: false });
      return;
    }
    // Lost again while re-attaching: the running reconnect sees it and dials again.
    if (this.reconnecting) return;
    this.reconnecting = error;
    this.host.events.emit('disconnected', { error, reconnecting: true });
    void this.reconnect(setup, error).catch((failure: unknown) => {
      this.host.logger.error('reconnecting failed unexpectedly', failure);
      this.giveUp(this.current, error, 0, failure);
    });
  }

  /**
   * Re-dial with bounded exponential backoff, re-initialize, then re-attach every unsettled run.
   * Runs keep waiting meanwhile; after `maxAttempts` failed re-dials they reject.
   */
  private async reconnect(setup: ReconnectSetup, lost: SubagentError): Promise<void> {
    const { policy } = setup;
    const lostChannel = this.current;
    const epochBefore = this.host.epoch();
    let lastFailure: unknown = lost;
    let attempts = 0;
    while (attempts < policy.maxAttempts) {
      if (this.closing) return;
      attempts += 1;
      await this.pause.sleep(backoffDelay(policy, attempts));
      if (this.closing) return;
      let channel: RpcChannel;
      let answer: InitializeResult;
      try {
        ({ channel, answer } = await this.redial(setup));
      } catch (error) {
        lastFailure = error;
        this.host.logger.warn?.(`reconnect attempt ${attempts} of ${policy.maxAttempts} to ${lostChannel.describe()} failed: ${messageOf(error)}`);
        if (error instanceof SubagentError && error.code === 'PROTOCOL_VERSION') break;
        continue;
      }
      if (this.closing) {
        await channel.close();
        return;
      }
      const restarted = epochBefore !== undefined && answer.daemon.epoch !== epochBefore;
      this.current = channel;
      this.host.adopt(answer);
      channel.onLost((error) => this.lost(channel, error));
      await this.reattachAll(channel, restarted);
      this.host.reattachChildren(channel);
      if (this.closing) return;
      if (channel.gone) {
        lastFailure = channel.gone;
        continue;
      }
      this.reconnecting = undefined;
      this.endRecovery();
      this.host.events.emit('reconnected', { epoch: answer.daemon.epoch, restarted, attempts });
      return;
    }
    this.giveUp(lostChannel, lost, attempts, lastFailure);
  }

  /** One re-dial: a new connection with the service's handlers, initialized. */
  private async redial(setup: ReconnectSetup): Promise<{ channel: RpcChannel; answer: InitializeResult }> {
    const { channel, token } = await setup.dial();
    this.dialling = channel;
    try {
      this.host.listenTo(channel);
      channel.listen();
      const answer = await handshake(channel, this.host.clientInfo, token, this.host.requestTimeoutMs ?? REATTACH_TIMEOUT_MS);
      return { channel, answer };
    } catch (error) {
      await channel.close();
      throw error;
    } finally {
      this.dialling = undefined;
    }
  }

  private giveUp(lostChannel: RpcChannel, lost: SubagentError, attempts: number, lastFailure: unknown): void {
    if (this.closing) return;
    const last = lastFailure === lost ? '' : ` (last: ${messageOf(lastFailure)})`;
    const error = new SubagentError(
      'DAEMON_UNAVAILABLE',
      `the connection to ${lostChannel.describe()} was lost and ${attempts} reconnect attempt${attempts === 1 ? '' : 's'} failed${last}; check \`subagentd status\`, or run \`subagentd start\``,
    );
    this.finalError = error;
    this.reconnecting = undefined;
    this.endRecovery();
    for (const record of this.host.runs.drain()) record.fail(error);
    this.retained.clear();
  }

  private async reattachAll(channel: RpcChannel, restarted: boolean): Promise<void> {
    const live = this.host.runs.live();
    const settled = [...this.retained.values()];
    await Promise.all([...live.map((record) => this.reattach(channel, record, restarted)), ...settled.map((record) => this.reclaim(channel, record))]);
  }

  /**
   * Take an unsettled run back. Settled meanwhile (or interrupted by a daemon restart) → its
   * result resolves it; still running → `subagent/end` on this connection settles it, with
   * `run/wait` as a backstop; unknown to the daemon → it was lost.
   */
  private async reattach(channel: RpcChannel, record: RunRecord, restarted: boolean): Promise<void> {
    let answer: AttachResult;
    try {
      answer = await this.attach(channel, record);
    } catch (error) {
      // Lost again: the next round re-attaches it.
      if (record.settled || channel.gone) return;
      const code = error instanceof SubagentError ? error.code : undefined;
      const why =
        code === 'NOT_OWNER' || code === 'UNKNOWN_RUN'
          ? `${channel.describe()}${restarted ? ', which restarted,' : ''} no longer knows it`
          : `it could not be re-attached`;
      record.fail(new SubagentError('DAEMON_UNAVAILABLE', `run ${record.runId} was lost when the connection dropped: ${why} (${messageOf(error)})`));
      return;
    }
    if (record.settled) return;
    const { result } = answer;
    if (result) {
      record.resolve(result);
      // The daemon's `subagent/end` went nowhere while we were away: tell listeners now.
      this.host.events.emit('subagent/end', endEventOf({ runId: record.runId, provider: answer.run.provider, id: answer.run.id, local: false }, result));
      return;
    }
    if (record.cancelOnReattach) {
      record.cancelOnReattach = false;
      this.host.sendCancel(channel, record);
    }
    channel.request(WaitRequest, { runId: record.runId }).then(
      (waited) => record.resolve(waited),
      (error: unknown) => {
        if (!record.settled && !channel.gone) this.host.logger.warn?.(`run/wait for re-attached run ${record.runId} failed`, error);
      },
    );
  }

  /** Take back a settled, undisposed run, so its dispose and resume reach the daemon; best effort. */
  private async reclaim(channel: RpcChannel, record: RunRecord): Promise<void> {
    try {
      await this.attach(channel, record);
    } catch (error) {
      if (channel.gone) return;
      this.retained.delete(record.runId);
      this.host.logger.warn?.(`settled run ${record.runId} could not be re-attached: ${messageOf(error)}`);
    }
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
