/**
 * The daemon's operations surface, for ops tools and reconnecting clients: status, the run
 * list, one run's record and session, re-attaching a run by its token, retention (gc) and shutdown.
 */
import {
  AttachRequest,
  InspectRequest,
  GcRequest,
  SessionLogRequest,
  RunsListRequest,
  ShutdownRequest,
  OperatorCancelRequest,
  StatusRequest,
  UiRequest,
  type UiResult,
  type AttachResult,
  type InspectResult,
  type GcResult,
  type SessionLogResult,
  type RunsListParams,
  type RunsListResult,
  type RunInfo,
  type ShutdownParams,
  type OperatorCancelParams,
  type StatusResult,
} from '../protocol/index.js';
import type { RpcChannel } from './rpc-channel.js';

export class DaemonOps {
  private readonly current: () => RpcChannel;

  /** `channel` may be a function: a reconnecting service hands the connection of the moment. */
  constructor(
    channel: RpcChannel | (() => RpcChannel),
    private readonly timeoutMs: number | undefined,
  ) {
    this.current = typeof channel === 'function' ? channel : () => channel;
  }

  private get channel(): RpcChannel {
    return this.current();
  }

  private get timeout(): { timeoutMs?: number } {
    return this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs };
  }

  /** `daemon/ui`: the web view's URL with a fresh one-time token (`subagentd ui`). */
  ui(): Promise<UiResult> {
    return this.channel.request(UiRequest, {}, this.timeout);
  }

  status(): Promise<StatusResult> {
    return this.channel.request(StatusRequest, {}, this.timeout);
  }

  /** Every run matching `filter`, newest first (one request; use `runsPage` for large indexes). */
  async runs(filter: Omit<RunsListParams, 'limit' | 'cursor'> = {}): Promise<RunInfo[]> {
    return (await this.runsPage(filter)).runs;
  }

  /** One page of `runs/list`: pass `nextCursor` back as `cursor` for the next. */
  runsPage(params: RunsListParams): Promise<RunsListResult> {
    return this.channel.request(RunsListRequest, params, this.timeout);
  }

  /** The run's record; its session too when this connection owns it or `runToken` proves ownership. */
  inspect(runId: string, runToken?: string): Promise<InspectResult> {
    const params = runToken === undefined ? { runId } : { runId, runToken };
    return this.channel.request(InspectRequest, params, this.timeout);
  }

  /** Takes ownership of a run with its token (after a reconnect, or a daemon restart). */
  attach(runId: string, runToken: string): Promise<AttachResult> {
    return this.channel.request(AttachRequest, { runId, runToken }, this.timeout);
  }

  /** Applies retention now and says what it removed. */
  gc(): Promise<GcResult> {
    return this.channel.request(GcRequest, {}, this.timeout);
  }

  /** Any run's stored session log, whoever owns it (the operator's read; `inspect` is the owner's). */
  session(runId: string): Promise<SessionLogResult> {
    return this.channel.request(SessionLogRequest, { runId }, this.timeout);
  }

  /** Cancels any live run as its owner would, descendants included (the operator's `run/cancel`). */
  async cancel(params: OperatorCancelParams): Promise<void> {
    await this.channel.request(OperatorCancelRequest, params, this.timeout);
  }

  async shutdown(params: ShutdownParams = {}): Promise<void> {
    await this.channel.request(ShutdownRequest, params, this.timeout);
  }
}
