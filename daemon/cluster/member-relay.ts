/**
 * Member-to-member messages over core NATS, on the subject of the member that receives them.
 * The member executing a run sends its owner's member the run's events (fire and forget, as a
 * local emit is) and asks it for what only the owner's client can answer: a client-hosted tool
 * call, a permission prompt. The owner's member hands each to the run's RunHost, which it
 * registered when it submitted the run. A continuable child's `report` travels the same way, to
 * the report sink registered with the host.
 *
 * Rules and failures:
 * - An event for a run this member does not host (disposed, or never ours) is dropped.
 * - A request for such a run, or one whose host throws, is answered with the error; the
 *   executing member's call rejects with it, as a local call to a gone client rejects.
 * - A request gets no answer while the members cannot reach each other: it times out after
 *   `requestTimeoutMs` (default 10 minutes, a tool's own time included).
 * - When the owner's member is this one, the messages go to the host directly, with no trip
 *   through NATS (a run executing where its client is connected costs what it does alone).
 */
import type { Subscription } from '@nats-io/transport-node';
import type { PermissionParams, PermissionResult, RunEvent, ToolCallResult } from '../../protocol/index.js';
import type { RunHost } from '../provider.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';

type Inbound =
  | { kind: 'event'; runId: string; event: RunEvent }
  | { kind: 'tool'; runId: string; call: { callId: string; name: string; arguments: unknown } }
  | { kind: 'permission'; runId: string; request: Omit<PermissionParams, 'runId'> }
  | { kind: 'report'; runId: string; childId: string; output: string; mode: 'quiet' | 'next-step' }
  /** Does the run's front still wait for its start (it hosts the run)? */
  | { kind: 'awaits'; runId: string };

/** Where an executing child's messages go: the run it speaks for and that run's owner member. */
export interface RelayTarget {
  runId: string;
  ownerMember: string;
}

/** A continuable child's report sink (ProviderStartRequest['report']). */
export type ReportSink = (childId: string, output: string, mode: 'quiet' | 'next-step') => void;

type Answer = { ok: unknown } | { error: string };

/** How long a member waits to hear whether a start's front still waits for it. */
const AWAITS_TIMEOUT_MS = 5000;

/** NATS answers at once when nobody subscribes to a subject: the member is gone. */
function isNoResponders(error: unknown): boolean {
  const e = error as { code?: unknown; name?: unknown; message?: unknown; isNoResponders?: () => boolean };
  if (typeof e?.isNoResponders === 'function' && e.isNoResponders()) return true;
  return e?.code === '503' || e?.name === 'NoRespondersError' || /no responders/i.test(String(e?.message ?? ''));
}

export class MemberRelay {
  private readonly hosts = new Map<string, RunHost>();
  private readonly reports = new Map<string, ReportSink>();
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

  /** Routes a run's events and calls to `host`, and its child's reports to `report`, until `forget`. */
  host(runId: string, host: RunHost, report?: ReportSink): void {
    this.hosts.set(runId, host);
    if (report) this.reports.set(runId, report);
  }

  forget(runId: string): void {
    this.hosts.delete(runId);
    this.reports.delete(runId);
  }

  /** The report sink, on the executing member, that forwards a child's reports to `target`'s member. */
  remoteReport(target: RelayTarget): ReportSink {
    return (childId, output, mode) => {
      if (target.ownerMember === this.memberId) return void this.reports.get(target.runId)?.(childId, output, mode);
      try {
        const { runId, ownerMember } = target;
        this.link.nc.publish(this.names.memberSubject(ownerMember), JSON.stringify({ kind: 'report', runId, childId, output, mode } satisfies Inbound));
      } catch {
        // offline: a report nobody can receive is dropped, as one for an owner with no connection is
      }
    };
  }

  /**
   * The host, on the executing member, that forwards to the run's owner member. `target` is read
   * at each call: a child continued here for a later run of its chain speaks for that run.
   * `afterEmit` runs after each event (the session mirror's cue).
   */
  remoteHost(target: RelayTarget, base: Pick<RunHost, 'log' | 'maxOutputBytes'>, afterEmit?: () => void): RunHost {
    const ask = async <T>(message: Inbound, signal: AbortSignal): Promise<T> => {
      signal.throwIfAborted();
      // The owner's client is on this member: hand it over here, as the NATS round trip would.
      if (target.ownerMember === this.memberId) {
        const host = this.hosts.get(message.runId);
        if (!host) throw new Error(`run ${message.runId} has no client on this member any more`);
        if (message.kind === 'tool') return (await host.callTool(message.call, signal)) as T;
        if (message.kind === 'permission') return (await host.askPermission(message.request, signal)) as T;
      }
      const reply = await this.link.nc.request(this.names.memberSubject(target.ownerMember), JSON.stringify(message), { timeout: this.requestTimeoutMs });
      const answer = reply.json<Answer>();
      if ('error' in answer) throw new Error(answer.error);
      return answer.ok as T;
    };
    return {
      get runId() {
        return target.runId;
      },
      // Read when used: the executing member makes each run's logger on first use.
      get log() {
        return base.log;
      },
      ...(base.maxOutputBytes !== undefined && { maxOutputBytes: base.maxOutputBytes }),
      emit: (event) => {
        // The owner's client is on this member (the usual case of a pool of one, or a run that
        // stayed where it started): the event goes to its host directly, as on a single daemon.
        if (target.ownerMember === this.memberId) {
          this.hosts.get(target.runId)?.emit(event);
          afterEmit?.();
          return;
        }
        try {
          this.link.nc.publish(this.names.memberSubject(target.ownerMember), JSON.stringify({ kind: 'event', runId: target.runId, event } satisfies Inbound));
        } catch {
          // offline or closed: events are best effort, as for a slow local client
        }
        afterEmit?.();
      },
      callTool: (call, signal) => ask<ToolCallResult>({ kind: 'tool', runId: target.runId, call }, signal),
      askPermission: (request, signal) => ask<PermissionResult>({ kind: 'permission', runId: target.runId, request }, signal),
    };
  }

  /**
   * Whether the run's front member still waits for its start: false only when that member is
   * gone (no member listens on its subject) or says it does not host the run. An answer that
   * does not come in time proves nothing (a busy member): the start goes ahead.
   */
  async awaited(target: RelayTarget): Promise<boolean> {
    if (target.ownerMember === this.memberId) return this.hosts.has(target.runId);
    try {
      const reply = await this.link.nc.request(this.names.memberSubject(target.ownerMember), JSON.stringify({ kind: 'awaits', runId: target.runId } satisfies Inbound), {
        timeout: AWAITS_TIMEOUT_MS,
      });
      return !('error' in reply.json<Answer>());
    } catch (error) {
      return !isNoResponders(error);
    }
  }

  /**
   * Whether `memberId` is alive: false only when no member listens on its subject (NATS answers
   * "no responders" at once for a killed or stopped member); a slow answer counts as alive.
   */
  async alive(memberId: string): Promise<boolean> {
    if (memberId === this.memberId) return true;
    try {
      await this.link.nc.request(this.names.memberSubject(memberId), JSON.stringify({ kind: 'awaits', runId: '' } satisfies Inbound), { timeout: AWAITS_TIMEOUT_MS });
      return true;
    } catch (error) {
      return !isNoResponders(error);
    }
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
    if (message.kind === 'report') {
      this.reports.get(message.runId)?.(message.childId, message.output, message.mode);
      return;
    }
    if (message.kind === 'awaits') {
      if (msg.reply) msg.respond(JSON.stringify(host ? { ok: true } : { error: `run ${message.runId} has no client on this member` }));
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
