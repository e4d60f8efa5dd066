/**
 * The bridge: one daemon connection per harness process, its providers mirrored into
 * `ctx.subagents`.
 *
 * - Every daemon provider (or those named in `config.providers`) is registered under its harness
 *   name with the daemon's real capabilities and `inheritsParentContext`, so the harness's own
 *   `subagent` tool words itself truthfully and enforces depth. Providers added to or removed
 *   from the daemon later follow.
 * - Losing the daemon is loud: one error line per outage. The client re-dials and re-attaches
 *   runs; if it gives up, the bridge dials a fresh connection in the background. Providers stay
 *   registered through an outage, so a delegation meanwhile fails with a typed
 *   DAEMON_UNAVAILABLE the model can read, instead of the tool silently vanishing.
 */
import { SubagentError, type AgentOptions } from '../protocol/index.js';
import { connect, ensureDaemon, type RemoteSubagentService } from '../client/index.js';
import type { HarnessContext, HarnessLogger, HarnessProvider, HarnessRun, HarnessStartRequest } from './harness-types.js';
import { mapHarnessRequest } from './request-map.js';
import { toHarnessResult } from './stop-reason.js';
import { worktreeNote } from '../tool/run-outcome.js';
import type { SubagentResult } from '../protocol/index.js';

/** The harness's tool reads only the output: an isolated child's branch and diffstat go there. */
function withWorktreeNote(result: SubagentResult): SubagentResult {
  return result.worktree === undefined ? result : { ...result, output: [...result.output, { type: 'text', text: worktreeNote(result) }] };
}

export interface BridgeConfig {
  /** The daemon's socket; it is started on demand when nothing answers there. */
  readonly socket: string;
  /** harness name → daemon provider name; default: every daemon provider under its own name. */
  readonly providers?: Readonly<Record<string, string>>;
  /** The CHILDREN's model route (never the parent's). */
  readonly agentOptions?: AgentOptions;
  /** Start the shared daemon when nothing answers at `socket`. */
  readonly autoStart: boolean;
  /** `worktree`: every child works in its own git worktree and branch; its result names them. */
  readonly isolation?: 'none' | 'worktree';
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;

export class DaemonBridge {
  private service: RemoteSubagentService | undefined;
  /** harness name → its registration's disposer. */
  private readonly registered = new Map<string, () => void>();
  private closed = false;
  private outage = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: HarnessContext,
    private readonly config: BridgeConfig,
    private readonly log: HarnessLogger = ctx.logger('subagentd'),
  ) {}

  /** First dial; on failure the bridge keeps trying in the background (and says so). */
  async open(): Promise<void> {
    try {
      await this.dial();
    } catch (error) {
      this.lost(error);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    for (const unregister of this.registered.values()) unregister();
    this.registered.clear();
    await this.service?.close();
    this.service = undefined;
  }

  private async dial(): Promise<void> {
    const { socket } = this.config;
    const service = await connect({
      socket,
      reconnect: true,
      ...(this.config.autoStart && { autoStart: async () => void (await ensureDaemon({ socket })) }),
      logger: { error: (message, error) => this.log.error('%s %s', message, error ?? ''), warn: (message) => this.log.warn(message) },
    });
    if (this.closed) return void (await service.close());
    this.service = service;
    service.on('subagent/provider-added', ({ provider, origin }) => {
      if (origin === 'daemon') this.sync();
      else this.log.debug('ignoring local provider %s', provider.name);
    });
    service.on('subagent/provider-removed', () => this.sync());
    service.on('disconnected', ({ error, reconnecting }) => {
      if (!reconnecting) this.lost(error);
      else this.announceOutage(error);
    });
    service.on('reconnected', ({ restarted }) => this.recovered(restarted ? 'a restarted daemon' : 'the daemon'));
    if (this.outage) this.recovered('the daemon');
    this.sync();
    this.log.info('connected to subagentd at %s: providers %s', socket, [...this.registered.keys()].join(', ') || '(none)');
  }

  /** Mirror the daemon's providers into the harness registry, by harness name. */
  private sync(): void {
    const service = this.service;
    if (service === undefined) return;
    const wanted = new Map<string, string>();
    const daemonNames = new Set(service.list());
    for (const [harnessName, daemonName] of Object.entries(this.config.providers ?? {})) {
      if (daemonNames.has(daemonName)) wanted.set(harnessName, daemonName);
      else this.log.warn('provider %s (daemon provider %s) is not offered by the daemon', harnessName, daemonName);
    }
    if (this.config.providers === undefined) for (const name of daemonNames) wanted.set(name, name);
    for (const [harnessName, unregister] of this.registered) {
      if (!wanted.has(harnessName)) {
        unregister();
        this.registered.delete(harnessName);
      }
    }
    for (const [harnessName, daemonName] of wanted) {
      if (!this.registered.has(harnessName)) this.registered.set(harnessName, this.ctx.subagents.registerProvider(this.provider(harnessName, daemonName)));
    }
  }

  private provider(harnessName: string, daemonName: string): HarnessProvider {
    const descriptor = this.service?.getProvider(daemonName);
    if (descriptor === undefined) throw new Error(`daemon provider ${daemonName} vanished`);
    return {
      name: harnessName,
      capabilities: descriptor.capabilities,
      inheritsParentContext: descriptor.inheritsParentContext,
      start: (request) => this.start(daemonName, request),
    };
  }

  private async start(daemonName: string, harnessRequest: HarnessStartRequest): Promise<HarnessRun> {
    const service = this.service;
    if (service === undefined || service.disconnected !== undefined) {
      throw new SubagentError('DAEMON_UNAVAILABLE', `subagentd is not reachable at ${this.config.socket}; the bridge keeps re-dialling`);
    }
    const { request, dropped } = mapHarnessRequest(harnessRequest, this.config.agentOptions);
    if (dropped.length > 0) this.log.debug('start request fields not sent to the daemon: %s', dropped.join(', '));
    const run = await service.start(daemonName, this.config.isolation === undefined ? request : { ...request, isolation: this.config.isolation });
    return { id: run.id, localAgent: undefined, result: run.result.then((result) => toHarnessResult(withWorktreeNote(result))), dispose: () => run.dispose() };
  }

  private announceOutage(error: unknown): void {
    if (this.outage) return;
    this.outage = true;
    const reason = error instanceof Error ? error.message : String(error);
    const line = `subagentd bridge: cannot reach the daemon at ${this.config.socket} (${reason}); delegations fail until it is back, re-dialling`;
    this.log.error(line);
    // Also straight to stderr: a harness without a log exporter must still show it.
    process.stderr.write(`${line}\n`);
  }

  private lost(error: unknown): void {
    this.announceOutage(error);
    this.service = undefined;
    this.scheduleRetry(RETRY_MIN_MS);
  }

  private recovered(what: string): void {
    if (!this.outage) return;
    this.outage = false;
    this.log.info('reconnected to %s at %s', what, this.config.socket);
  }

  private scheduleRetry(delayMs: number): void {
    if (this.closed) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.dial().catch((error: unknown) => {
        this.log.debug('re-dial failed: %s', error instanceof Error ? error.message : String(error));
        this.scheduleRetry(Math.min(delayMs * 2, RETRY_MAX_MS));
      });
    }, delayMs);
    this.retryTimer.unref();
  }
}
