/**
 * The seam's `ContinuableChildren` over a daemon connection (`child/*`): what a
 * `RemoteSubagentService` offers as its `children` member when the daemon supports it.
 *
 * Children belong to this client's owner key (a secret sent with every call, never logged) and
 * to the parent session that started them, so they outlive connections and daemon restarts. A
 * service keeps one key for its life; pass `ownerKey` to the service to keep children across
 * processes (the CLI does). Settlement notices arrive as `child/settled`; a listener subscribes
 * the connection (`child/attach`), and a reconnect subscribes the new one, which also delivers
 * what settled while no connection was there.
 */
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import {
  ChildAttachRequest,
  ChildInterruptRequest,
  ChildListRequest,
  ChildSendRequest,
  ChildStartRequest,
  SubagentError,
  type ChildListing,
  type ChildReport,
  type ChildSettledNotice,
  type ChildStartParams,
  type ContentBlock,
  type ContinuableChildren,
  type InterruptLevel,
  type ProviderDescriptor,
  type SubagentStartRequestBase,
  type WorktreeIsolationRequest,
} from '../protocol/index.js';
import { toParentRef } from './parent-ref.js';
import { commonStartFields, continuationTrace } from './start-fields.js';
import type { RpcChannel } from './rpc-channel.js';
import type { ClientLogger, ParentInput } from './types.js';

/** A continuable start: the seam's fields, a parent, and the label `child/list` shows. */
export interface ChildStartRequest extends SubagentStartRequestBase, WorktreeIsolationRequest {
  readonly parent: ParentInput;
  readonly label?: string;
  readonly env?: Readonly<Record<string, string>>;
  /** As on a one-shot start (ClientStartRequest.traceparent). */
  readonly traceparent?: string;
}

/** Who acts: a harness agent, a parent reference, or a session id (a child's own id included). */
export type ChildActor = ParentInput | string;

export interface RemoteChildrenContext {
  readonly channel: () => RpcChannel;
  readonly describe: (provider: string) => ProviderDescriptor | undefined;
  readonly ownerKey: string;
  /** The daemon's protocol version, from its latest `initialize` answer. */
  readonly protocolVersion: () => string;
  readonly requestTimeoutMs: number | undefined;
  readonly startTimeoutMs: number | undefined;
  readonly logger: ClientLogger;
}


export class RemoteChildren implements ContinuableChildren<ChildStartRequest, ChildActor> {
  private readonly listeners = new Set<(notice: ChildSettledNotice) => void>();
  private readonly reporters = new Set<(report: ChildReport) => void>();
  private attachedTo: RpcChannel | undefined;

  constructor(private readonly ctx: RemoteChildrenContext) {}

  async start(provider: string, request: ChildStartRequest): Promise<{ childId: string; messageId: string }> {
    const descriptor = this.ctx.describe(provider);
    if (!descriptor) throw new SubagentError('NO_PROVIDER', `no daemon provider named '${provider}'`);
    if (request.outputSchema !== undefined) {
      throw new SubagentError('UNSUPPORTED_CAPABILITY', 'a continuable child takes messages, not an output schema', { field: '/outputSchema' });
    }
    if (request.signal.aborted) throw new SubagentError('ABORTED', `the start of '${provider}' was aborted before it was sent`);
    const params: ChildStartParams = { ownerKey: this.ctx.ownerKey, ...commonStartFields(provider, descriptor, request) };
    // Before the answer the signal cancels the start; afterwards the child runs on its own.
    const pending = new CancellationTokenSource();
    const onAbort = (): void => pending.cancel();
    request.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.ctx.channel().request(ChildStartRequest, params, {
        token: pending.token,
        ...timeout(this.ctx.startTimeoutMs),
      });
    } finally {
      request.signal.removeEventListener('abort', onAbort);
      pending.dispose();
    }
  }

  /** `options.traceparent`: the caller's trace context, which the turn it wakes continues (default: the active span's). */
  sendMessage(childId: string, message: ContentBlock[], from: ChildActor, options: { readonly traceparent?: string } = {}): Promise<{ messageId: string }> {
    return this.ctx.channel().request(
      ChildSendRequest,
      { ownerKey: this.ctx.ownerKey, childId, from: sessionOf(from), message, ...continuationTrace(options.traceparent, this.ctx.protocolVersion()) },
      // A cold resume restores the child before the message is accepted: a start-like wait.
      timeout(this.ctx.startTimeoutMs),
    );
  }

  async interrupt(childId: string, by: ChildActor, level: InterruptLevel = 'now'): Promise<void> {
    await this.ctx.channel().request(
      ChildInterruptRequest,
      { ownerKey: this.ctx.ownerKey, childId, by: sessionOf(by), level },
      timeout(this.ctx.requestTimeoutMs),
    );
  }

  list(of: ChildActor, scope: 'children' | 'descendants' = 'children'): Promise<ChildListing> {
    return this.ctx.channel().request(
      ChildListRequest,
      { ownerKey: this.ctx.ownerKey, of: sessionOf(of), scope },
      timeout(this.ctx.requestTimeoutMs),
    );
  }

  onSettled(listener: (notice: ChildSettledNotice) => void): { dispose(): void } {
    this.listeners.add(listener);
    this.attach(this.ctx.channel());
    return { dispose: () => void this.listeners.delete(listener) };
  }

  /** Reports children send with their `report` tool while this service is connected. */
  onReport(listener: (report: ChildReport) => void): { dispose(): void } {
    this.reporters.add(listener);
    this.attach(this.ctx.channel());
    return { dispose: () => void this.reporters.delete(listener) };
  }

  /** The service's connection changed (a reconnect): subscribe the new one if anyone listens. */
  reattach(channel: RpcChannel): void {
    if (this.listeners.size > 0 || this.reporters.size > 0) this.attach(channel);
  }

  /** A `child/report` from the daemon. */
  deliverReport(report: ChildReport): void {
    this.notify(this.reporters, report, 'child/report');
  }

  /** A `child/settled` from the daemon. */
  deliver(notice: ChildSettledNotice): void {
    this.notify(this.listeners, notice, 'child/settled');
  }

  /** A listener that throws is logged and does not stop the others. */
  private notify<T>(listeners: Iterable<(value: T) => void>, value: T, what: string): void {
    for (const listener of listeners) {
      try {
        listener(value);
      } catch (error) {
        this.ctx.logger.error(`a ${what} listener threw`, error);
      }
    }
  }

  private attach(channel: RpcChannel): void {
    if (this.attachedTo === channel) return;
    this.attachedTo = channel;
    channel
      .request(ChildAttachRequest, { ownerKey: this.ctx.ownerKey }, timeout(this.ctx.requestTimeoutMs))
      .catch((error: unknown) => {
        if (this.attachedTo === channel) this.attachedTo = undefined;
        this.ctx.logger.warn?.('child/attach failed: settlement notices wait in the daemon until the next attach', error);
      });
  }
}

function sessionOf(actor: ChildActor): string {
  return typeof actor === 'string' ? actor : toParentRef(actor, { includeEvents: false }).sessionId;
}

function timeout(ms: number | undefined): { timeoutMs?: number } {
  return ms === undefined ? {} : { timeoutMs: ms };
}
