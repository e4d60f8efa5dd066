/**
 * Member-to-member messages over core NATS, on the subject of the member that receives them.
 * The member executing a run sends its owner's member the run's events (fire and forget, as a
 * local emit is) and asks it for what only the owner's client can answer: a client-hosted tool
 * call, a permission prompt. The owner's member hands each to the run's RunHost, which it
 * registered when it submitted the run.
 *
 * Rules and failures:
 * - An event for a run this member does not host (disposed, or never ours) is dropped.
 * - A request for such a run, or one whose host throws, is answered with the error; the
 *   executing member's call rejects with it, as a local call to a gone client rejects.
 * - A request gets no answer while the members cannot reach each other: it times out after
 *   `requestTimeoutMs` (default 10 minutes, a tool's own time included).
 */
import type { Subscription } from '@nats-io/transport-node';
import type { PermissionParams, PermissionResult, RunEvent, ToolCallResult } from '../../protocol/index.js';
import type { RunHost } from '../provider.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';

type Inbound =
  | { kind: 'event'; runId: string; event: RunEvent }
  | { kind: 'tool'; runId: string; call: { callId: string; name: string; arguments: unknown } }
  | { kind: 'permission'; runId: string; request: Omit<PermissionParams, 'runId'> };

/** Where an executing child's messages go: its run and that run's owner member, read at each message (the owner may move). */
export interface RelayTarget {
  readonly runId: string;
  ownerMember: string;
}

type Answer = { ok: unknown } | { error: string };

export class MemberRelay {
  private readonly hosts = new Map<string, RunHost>();
  private readonly subscription: Subscription;

  constructor(
    private readonly link: NatsLink,
    private readonly names: ClusterNames,
    readonly memberId: string,
    private readonly requestTimeoutMs = 600_000,
  ) {
    this.subscription = link.nc.subscribe(names.memberSubject(memberId), {
      callback: (error, msg) => {
        if (!error) void this.receive(msg);
      },
    });
  }

  /** Routes a run's events and calls to `host` until `forget`. */
  host(runId: string, host: RunHost): void {
    this.hosts.set(runId, host);
  }

  forget(runId: string): void {
    this.hosts.delete(runId);
  }

  /** The host, on the executing member, that forwards to the run's owner member (`target`'s, at each message). */
  remoteHost(target: RelayTarget, base: Pick<RunHost, 'log' | 'maxOutputBytes'>): RunHost {
    const { runId } = target;
    const subject = (): string => this.names.memberSubject(target.ownerMember);
    const ask = async <T>(message: Inbound, signal: AbortSignal): Promise<T> => {
      signal.throwIfAborted();
      const reply = await this.link.nc.request(subject(), JSON.stringify(message), { timeout: this.requestTimeoutMs });
      const answer = reply.json<Answer>();
      if ('error' in answer) throw new Error(answer.error);
      return answer.ok as T;
    };
    return {
      runId,
      log: base.log,
      ...(base.maxOutputBytes !== undefined && { maxOutputBytes: base.maxOutputBytes }),
      emit: (event) => {
        try {
          this.link.nc.publish(subject(), JSON.stringify({ kind: 'event', runId, event } satisfies Inbound));
        } catch {
          // offline or closed: events are best effort, as for a slow local client
        }
      },
      callTool: (call, signal) => ask<ToolCallResult>({ kind: 'tool', runId, call }, signal),
      askPermission: (request, signal) => ask<PermissionResult>({ kind: 'permission', runId, request }, signal),
    };
  }

  close(): void {
    this.subscription.unsubscribe();
  }

  private async receive(msg: { json<T>(): T; respond(data: string): boolean; reply?: string }): Promise<void> {
    let message: Inbound;
    try {
      message = msg.json<Inbound>();
    } catch {
      return;
    }
    const host = this.hosts.get(message.runId);
    if (message.kind === 'event') {
      host?.emit(message.event);
      return;
    }
    let answer: Answer;
    try {
      if (!host) throw new Error(`run ${message.runId} has no client on this member any more`);
      const signal = AbortSignal.timeout(this.requestTimeoutMs);
      answer = { ok: message.kind === 'tool' ? await host.callTool(message.call, signal) : await host.askPermission(message.request, signal) };
    } catch (error) {
      answer = { error: error instanceof Error ? error.message : String(error) };
    }
    if (msg.reply) msg.respond(JSON.stringify(answer));
  }
}
