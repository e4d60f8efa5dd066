/**
 * The member's one connection to the shared NATS server, and whether it is up.
 *
 * Rules and failures:
 * - At start the server must answer within `connectTimeoutMs` and have JetStream enabled, else
 *   `openNatsLink` rejects with CLUSTER_UNAVAILABLE naming the URL and the reason: a member
 *   never runs half-joined.
 * - Once connected, a lost connection is retried forever (every 250 ms, jittered); `online`
 *   turns false at the disconnect and true at the reconnect, and listeners hear both. Callers
 *   refuse new admissions while offline (`assertOnline`) and keep what already runs.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { SubagentError } from '../../protocol/index.js';

export interface NatsLinkOptions {
  /** Shown in the server's connection list (`subagentd <member id>`). */
  readonly name: string;
  readonly connectTimeoutMs?: number;
}

export type LinkListener = (online: boolean) => void;

export class NatsLink {
  private up = true;
  private readonly listeners = new Set<LinkListener>();

  private constructor(
    readonly url: string,
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
  ) {
    void this.follow();
  }

  get online(): boolean {
    return this.up && !this.nc.isClosed();
  }

  /** Throws CLUSTER_UNAVAILABLE while the server is unreachable. */
  assertOnline(): void {
    if (!this.online) throw unavailable(this.url, 'the connection is lost; the member is reconnecting');
  }

  onChange(listener: LinkListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drains when connected (bounded by 2 s), else closes at once: a member must exit while NATS is gone. */
  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    if (!this.up) return this.nc.close();
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)));
    await Promise.race([this.nc.drain().catch(() => undefined), bound]);
    clearTimeout(timer);
    if (!this.nc.isClosed()) await this.nc.close();
  }

  private async follow(): Promise<void> {
    for await (const status of this.nc.status()) {
      const next = status.type === 'reconnect' ? true : status.type === 'disconnect' ? false : this.up;
      if (next === this.up) continue;
      this.up = next;
      for (const listener of this.listeners) listener(next);
    }
  }

  static async open(url: string, options: NatsLinkOptions): Promise<NatsLink> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: url,
        name: options.name,
        timeout: options.connectTimeoutMs ?? 5000,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        reconnectJitter: 100,
        pingInterval: 5000,
        // No error (with its stack) built ahead of every request in case it fails: on a pooled
        // run's path that was a few % of a member's CPU. A failure still has its message and code.
        noAsyncTraces: true,
      });
    } catch (error) {
      throw unavailable(url, reasonOf(error));
    }
    try {
      const jsm = await jetstreamManager(nc, { timeout: options.connectTimeoutMs ?? 5000 });
      return new NatsLink(url, nc, jetstream(nc), jsm);
    } catch (error) {
      await nc.close();
      throw unavailable(url, `JetStream is not available there (${reasonOf(error)}); start nats-server with -js`);
    }
  }
}

export function unavailable(url: string, reason: string): SubagentError {
  return new SubagentError('CLUSTER_UNAVAILABLE', `cannot reach the cluster's NATS server at ${url}: ${reason}`);
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs `call` (a NATS request, a JetStream publish or KV write) with no stack captured for the
 * errors the client builds ahead of every request, in case it times out: on the hot path of a
 * pooled run (about eight requests each) that capture was about 8 % of a member's CPU in the bench.
 * A failure still carries its message and code; only its stack is empty.
 */
export function withoutStacks<T>(call: () => Promise<T>): Promise<T> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return call();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
