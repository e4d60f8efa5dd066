/**
 * The daemon as a library: a service with its providers, served over a unix socket and/or any
 * stream pair (stdio), with its identity, status and an orderly shutdown.
 *
 * Over 400 lines on purpose: the listeners, the status and the shutdown all act on the daemon's
 * one set of connections and its one closing state, held in `createDaemon`'s closure; each
 * listener's connection cap (listen/connection-cap.ts) and the options' shapes already live apart.
 */
import { randomBytes, randomUUID, chmodSync, existsSync, mkdirSync, rmSync, statSync } from '../common/node-builtins.js';
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from 'pino';
import { DEFAULT_FRAME_LIMITS, type FrameLimits } from './connection/guarded-reader.js';
import { makeRoom, refuseOverCap } from './listen/connection-cap.js';
import {
  PROTOCOL_VERSION,
  SubagentError,
  type DaemonIdentity,
  type GcResult,
  type SessionLogResult,
  type StatusResult,
  type UiResult,
} from '../protocol/index.js';
import { createToken, tokenPathFor, writeTokenFile } from '../common/daemon-token.js';
import { isoTime } from '../common/iso-time.js';
import { ClientConnection } from './connection/client-connection.js';
import type { DaemonProvider } from './provider.js';
import { SubagentService } from './service/subagent-service.js';
import { ContinuableChildren } from './service/children.js';
import { ChildIndex } from './store/child-index.js';
import type { Upstream } from './upstream/upstream.js';
import type { TokenBudgets } from './upstream/token-budgets.js';
import type { Delegation } from './service/delegation.js';
import { DEFAULT_ADMISSION_LIMITS, type AdmissionLimits } from './store/admission-queue.js';
import { LocalLedger } from './store/local-ledger.js';
import type { RunLedger } from './store/run-ledger.js';
import type { StartKeyStore } from './idempotency/start-keys.js';
import { agentGroupsDir, reapAgentGroups } from './providers/acp/agent-groups.js';
import { acquireStateLock } from './ops/state-lock.js';
import { StartupError, startupFailure } from './ops/startup-error.js';
import { nodeVersionProblem } from '../common/node-version.js';
import { RunIndex } from './store/run-index.js';
import { StateFaults } from './store/state-faults.js';
import { DEFAULT_RUN_RETENTION, DEFAULT_SESSION_RETENTION, pruneRuns, type RetentionLimits } from './store/run-retention.js';
import { pruneSessions } from './store/session-retention.js';
import { listenUnix } from './listen/unix-socket.js';
import { listenLoopbackTcp, readPrivateToken } from './listen/loopback-tcp.js';
import { packageVersion } from '../common/package-info.js';
import { createLogger } from './ops/logger.js';
import { sessionFilePath, stateFiles } from './ops/paths.js';
import { readSessionFile } from './store/session-reader.js';
import { PollSpin } from './connection/poll-spin.js';
import { PreAuthBudget } from './connection/pre-auth-budget.js';
import { WorktreeIsolation, type IsolationOptions } from './worktrees/isolating-provider.js';

export interface DaemonOptions {
  readonly stateDir: string;
  /** Trusted same-process providers to register at start. */
  readonly providers?: readonly DaemonProvider[];
  readonly log?: Logger;
  readonly frameLimits?: Partial<FrameLimits>;
  /** Require the per-daemon token at `initialize` on the socket (default true). */
  readonly requireToken?: boolean;
  /** Unsent notifications per connection past which streamed progress is coalesced (default 256). */
  readonly maxPendingNotifications?: number;
  /** Unsent messages past which a connection that stopped reading is cut off (default 4096). */
  readonly maxUnsentBeforeCutoff?: number;
  /** Streamed progress kept per slow connection; past it the client is cut off (default 1 MiB). */
  readonly maxBacklogBytes?: number;
  /** Bytes written to a connection and not yet read past which it is cut off (default 16 MiB). */
  readonly maxUnsentBytes?: number;
  /** How long a new unix-socket or stdio connection may take to call `initialize` (default 30 s). */
  readonly initializeTimeoutMs?: number;
  /** Unix-socket connections served at once; more are refused at accept (default 1024). */
  readonly maxConnections?: number;
  /** Bytes one connection may send before its `initialize` is accepted (default 64 KiB; pre-auth-budget.ts). */
  readonly preAuthBytes?: number;
  /** Bytes all connections not yet initialized may make the daemon hold together (default 4 MiB). */
  readonly preAuthTotalBytes?: number;
  /** Days a session log is kept after its last write (default 14; `retention.sessions.maxAgeDays` wins). */
  readonly sessionRetentionDays?: number;
  /** Retention of stored runs and session logs by age and count (defaults in store/run-retention.ts). */
  readonly retention?: { readonly runs?: Partial<RetentionLimits>; readonly sessions?: Partial<RetentionLimits> };
  /** How long a disconnected client's runs wait to be re-attached (default 60 s). */
  readonly detachGraceMs?: number;
  /** How long the event loop keeps polling after hearing from or answering a client, in µs (poll-spin.ts; default 250, 0 = off). */
  readonly pollSpinMicros?: number;
  /** The shared concurrency budget (see admission-queue.ts). */
  readonly admission?: Partial<AdmissionLimits>;
  /** The service's ledger built on this daemon's own (a cluster member's answers for the whole pool); default: the local one. */
  readonly ledger?: (local: LocalLedger) => RunLedger;
  /** Cap on one run's output and on its event stream (protocol/output-cap.ts; default 2 MiB). */
  readonly maxOutputBytes?: number;
  /** limits.idempotencyWindowMs: how long a start's idempotency key answers for its run. */
  readonly idempotencyWindowMs?: number;
  /** Where keyed starts are remembered (a cluster member: the pool's KV bucket); default: this daemon's memory. */
  readonly startKeys?: StartKeyStore;
  /** The config and environment in force, for status (see reload.ts). */
  readonly settingsStatus?: () => NonNullable<StatusResult['config']>;
  /** Write faults of the state dir; pass the one the daemon log reports to (see state-faults.ts). */
  readonly faults?: StateFaults;
  /** Nested delegation's tools, mounted over this daemon's service (see service/delegation.ts). */
  readonly delegation?: Delegation;
  /** Worktree isolation's settings (config `worktrees`; see worktrees/isolating-provider.ts). */
  readonly worktrees?: Omit<IsolationOptions, 'shuttingDown' | 'stateWorktrees'>;
  /** How `run_shell` runs, for status; absent when the shell tool is off. */
  readonly shell?: 'sandboxed' | 'unsandboxed';
  /** The model endpoints' governors, for status (daemon/upstream/). */
  readonly upstream?: Upstream;
  /** Token budgets of lineages and clients (daemon/upstream/token-budgets.ts). */
  readonly budgets?: TokenBudgets;
}

export interface TcpListenOptions {
  readonly host: string;
  readonly port: number;
  readonly tokenFile: string;
  readonly maxConnections?: number;
  readonly authTimeoutMs?: number;
}

export const DEFAULT_MAX_UNIX_CONNECTIONS = 1024;
export const DEFAULT_MAX_TCP_CONNECTIONS = 64;
export const DEFAULT_TCP_AUTH_TIMEOUT_MS = 5000;
export const DEFAULT_MAX_UNSENT_BYTES = 16 * 1024 * 1024;
export const DEFAULT_POLL_SPIN_MICROS = 250;

export interface Daemon {
  readonly service: SubagentService;
  /** Worktree isolation (daemon/worktrees/): a cluster member's executing side wraps its real providers with `isolate`. */
  readonly worktrees: WorktreeIsolation;
  readonly children: ContinuableChildren;
  readonly identity: DaemonIdentity;
  readonly log: Logger;
  /** Listen on a unix socket; writes the token file beside it. */
  listen(socketPath: string): Promise<void>;
  /**
   * Listen on loopback TCP; every client must present the bearer token read from `tokenFile`
   * (0600, ours) within `authTimeoutMs` (default 5 s). TCP connections have their own cap
   * (`maxConnections`, default 64), so TCP clients can never take the unix socket's room.
   */
  listenTcp(options: TcpListenOptions): Promise<{ port: number }>;
  /** Exit once nobody is connected and nothing runs for this long (monotonic: a suspend is not idle time). */
  exitWhenIdle(idleTimeoutMs: number): void;
  /** Serve one client over a stream pair (stdio mode, embedding, tests). */
  serve(input: Readable, output: Writable, onClose?: () => void): ClientConnection;
  status(): StatusResult;
  /** Applies retention now: archives finished runs, removes runs and session logs past the limits. */
  gc(): GcResult;
  /** Stop accepting, optionally drain running children, dispose every run, release the state dir. */
  close(options?: { drain?: boolean; timeoutMs?: number }): Promise<void>;
  readonly whenClosed: Promise<void>;
}

export function createDaemon(options: DaemonOptions): Daemon {
  // The CLI refuses an old Node at its first line; an embedder reaches this one.
  const oldNode = nodeVersionProblem();
  if (oldNode !== undefined) throw new StartupError(oldNode);
  prepareStateDir(options.stateDir);
  const files = stateFiles(options.stateDir);
  const releaseLock = acquireStateLock(files.lock);
  const faults = options.faults ?? new StateFaults();
  const log = options.log ?? createLogger({ file: files.log, faults });
  faults.attach(log);
  // Only the lock holder reaps: ACP agents a killed predecessor left running (see agent-groups.ts).
  void reapAgentGroups(agentGroupsDir(options.stateDir), log).catch((error: unknown) => log.error({ err: error }, 'reaping orphaned agents failed'));
  const startedAt = Date.now();
  const identity: DaemonIdentity = {
    name: 'subagentd',
    version: packageVersion(),
    pid: process.pid,
    startedAt: isoTime(startedAt),
    epoch: randomBytes(12).toString('base64url'),
  };
  const index = new RunIndex(files.runIndex, undefined, faults);
  if (index.problems.tornTail) log.warn({ file: files.runIndex }, 'run index: torn last line (a crash mid-write) ignored');
  for (const problem of index.problems.corrupt) {
    log.error({ file: files.runIndex, line: problem.line, reason: problem.reason }, 'run index: corrupt line kept aside in a .corrupt copy');
  }
  const local = new LocalLedger(index, { ...DEFAULT_ADMISSION_LIMITS, ...options.admission }, identity.epoch);
  const ledger = options.ledger?.(local) ?? local;
  const isolation = new WorktreeIsolation({ ...options.worktrees, stateWorktrees: files.worktrees, shuttingDown: () => service.isShuttingDown });
  const service: SubagentService = new SubagentService(log, {
    ledger,
    decorateProvider: isolation.decorate,
    ...(options.detachGraceMs !== undefined && { detachGraceMs: options.detachGraceMs }),
    ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }),
    ...(options.budgets && { budgets: options.budgets }),
    ...(options.idempotencyWindowMs !== undefined && { idempotencyWindowMs: options.idempotencyWindowMs }),
    ...(options.startKeys && { startKeys: options.startKeys }),
  });
  options.delegation?.bind(service);
  const children = new ContinuableChildren(service, new ChildIndex(files.children), log);
  const limits: FrameLimits = { ...DEFAULT_FRAME_LIMITS, ...options.frameLimits };
  const pollSpinMicros = options.pollSpinMicros ?? DEFAULT_POLL_SPIN_MICROS;
  const spin = pollSpinMicros > 0 ? new PollSpin(pollSpinMicros) : undefined;
  const connections = new Set<ClientConnection>();
  const maxUnixConnections = options.maxConnections ?? DEFAULT_MAX_UNIX_CONNECTIONS;
  const initializeTimeoutMs = options.initializeTimeoutMs ?? 30_000;
  const preAuth = new PreAuthBudget(options.preAuthBytes, options.preAuthTotalBytes);
  const listeners: Array<{ close(): Promise<void>; tokenPath: string }> = [];
  let socketPath: string | undefined;
  let token: string | undefined;
  let closing: Promise<void> | undefined;
  let resolveClosed!: () => void;
  const whenClosed = new Promise<void>((resolve) => (resolveClosed = resolve));

  for (const provider of options.providers ?? []) service.registry.register(provider);
  const runRetention: RetentionLimits = { ...DEFAULT_RUN_RETENTION, ...options.retention?.runs };
  const sessionRetention: RetentionLimits = {
    ...DEFAULT_SESSION_RETENTION,
    ...(options.sessionRetentionDays !== undefined && { maxAgeDays: options.sessionRetentionDays }),
    ...options.retention?.sessions,
  };
  const gc = (): GcResult => {
    const runsArchived = index.archiveFinished();
    const runsRemoved = pruneRuns(index, runRetention);
    // Runs that may still change are the ones held in memory: their logs are never counted out.
    const live = new Set(index.all().filter((r) => r.state !== 'settled' && r.state !== 'disposed').map((r) => r.id));
    const sessionsRemoved = pruneSessions(files.sessions, sessionRetention.maxAgeDays * 86_400_000, log, Date.now(), sessionRetention.maxCount, (id) => live.has(id));
    if (runsRemoved > 0) log.info({ runsRemoved, ...runRetention }, 'removed stored runs past retention');
    if (index.archive.unreadable > 0) log.warn({ lines: index.archive.unreadable }, 'run archive: unreadable lines skipped');
    return { runsArchived, runsRemoved, sessionsRemoved, runsStored: index.archive.count + index.all().length };
  };
  /** `daemon/session`: the operator's read of any run's stored session log. */
  const sessionLog = async (runId: string): Promise<SessionLogResult> => {
    const file = sessionFilePath(files.sessions, await service.childIdOf(runId));
    if (!existsSync(file)) {
      throw new SubagentError('UNKNOWN_RUN', `run ${runId} has no session log: its provider keeps none, or retention removed it`, { field: '/runId' });
    }
    const { header, events } = await readSessionFile(file);
    return { header, events: [...events] };
  };
  // Before anyone can attach: a dead daemon's runs read as interrupted, and a checkpointed run
  // is live under its id when its owner asks.
  const continuing = (async () => {
    const interrupted = await service.markInterrupted();
    for (const run of interrupted) log.warn({ runId: run.runId, deadPid: run.worker.pid }, 'run interrupted by a previous daemon\'s death');
    if (interrupted.length > 0 && existsSync(files.worktrees)) {
      const orphans = (await isolation.worktrees()).markOrphans(new Set(interrupted.map((run) => run.runId)));
      if (orphans.length > 0) log.warn({ worktrees: orphans }, 'worktrees of interrupted runs are orphaned: `subagentd worktrees prune` removes them');
    }
    gc(); // after: the interrupted runs are finished, and archived with the rest
    const continued = await service.continueCheckpointed();
    if (continued.length > 0) log.info({ runs: continued }, 'continuing children checkpointed by the previous daemon');
    await children.adoptLiveTurns();
  })();
  const pruning = setInterval(gc, 86_400_000);
  pruning.unref();

  const status = (): StatusResult => ({
    daemon: identity,
    protocolVersion: PROTOCOL_VERSION,
    uptimeMs: Date.now() - startedAt,
    ...(socketPath !== undefined && { socket: socketPath }),
    stateDir: options.stateDir,
    connections: connections.size,
    runs: service.counts(),
    providers: service.registry.list(),
    shuttingDown: service.isShuttingDown,
    admission: admissionStatus(),
    memory: { rss: process.memoryUsage.rss(), heapUsed: process.memoryUsage().heapUsed },
    worker: ledger.worker,
    ...(spin && { pollSpin: { windowMicros: pollSpinMicros, ...spin.stats } }),
    ...(options.settingsStatus && { config: options.settingsStatus() }),
    ...(options.shell && { shell: options.shell }),
    ...endpoints(),
    ...degraded(),
  });
  const endpoints = (): Pick<StatusResult, 'endpoints'> => {
    const governed = options.upstream?.status() ?? [];
    return governed.length > 0 ? { endpoints: governed } : {};
  };
  const degraded = (): Pick<StatusResult, 'degraded'> => {
    const state = faults.degraded();
    return state ? { degraded: state } : {};
  };

  const admissionStatus = (): StatusResult['admission'] => {
    const { running, queued, byConnection, execution } = ledger.admission();
    const named: StatusResult['admission']['byConnection'] = {};
    for (const connection of connections) {
      const share = byConnection[connection.id];
      if (share) named[connection.id] = { ...share, client: connection.clientName };
    }
    // How slots are held: roots on the shared budget, descendants on the slot their parent lent them.
    const lineage = service.lineageAdmission();
    return {
      running,
      queued,
      roots: running,
      descendants: lineage.descendants,
      descendantsWaiting: lineage.waiting,
      ...(execution && { execution }),
      limits: ledger.limits,
      byConnection: named,
    };
  };

  /**
   * Serves one client. `ofListener` is the listener's own set of connections (its cap counts
   * only its own); `initializeWithinMs` is how long the client has to call `initialize`.
   */
  const serve = (
    input: Readable,
    output: Writable,
    destroy: () => void,
    connectionToken: string | undefined,
    initializeWithinMs = initializeTimeoutMs,
    ofListener?: Set<ClientConnection>,
  ): ClientConnection => {
    const connection: ClientConnection = new ClientConnection(
      randomUUID(),
      input,
      output,
      {
        service,
        children,
        identity,
        limits,
        token: connectionToken,
        maxPendingNotifications: options.maxPendingNotifications ?? 256,
        maxUnsentBeforeCutoff: options.maxUnsentBeforeCutoff ?? 4096,
        maxUnsentBeforePause: 256,
        initializeTimeoutMs: initializeWithinMs,
        preAuth,
        maxBacklogBytes: options.maxBacklogBytes ?? 1024 * 1024,
        maxUnsentBytes: options.maxUnsentBytes ?? DEFAULT_MAX_UNSENT_BYTES,
        // Write-ahead: what a client hears of (a token, a result) is in the run index first.
        beforeWrite: () => index.flush(),
        ...(spin && { spin }),
        status,
        shutdown: (drain, timeoutMs) => void daemon.close({ drain, timeoutMs }),
        gc,
        sessionLog,
        openUi,
        log,
      },
      destroy,
    );
    connections.add(connection);
    ofListener?.add(connection);
    void connection.whenClosed.then(() => {
      connections.delete(connection);
      ofListener?.delete(connection);
    });
    return connection;
  };

  /** `daemon/ui`: the web view (daemon/ui/), loaded and started at the first ask, on loopback. */
  let ui: Promise<{ mintUrl(): string; close(): Promise<void> }> | undefined;
  const openUi = async (): Promise<UiResult> => {
    if (service.isShuttingDown) throw new SubagentError('SHUTTING_DOWN', 'the daemon is shutting down');
    ui ??= import('./ui/ui-server.js').then((module) => module.startUi(daemon));
    ui.catch(() => (ui = undefined));
    return { url: (await ui).mintUrl() };
  };

  const daemon: Daemon = {
    service,
    worktrees: isolation,
    children,
    identity,
    log,
    whenClosed,
    status,
    gc,
    async listen(path) {
      await continuing;
      const requireToken = options.requireToken ?? true;
      const tokenPath = tokenPathFor(path);
      const ours = new Set<ClientConnection>();
      const listener = await listenUnix(
        path,
        (socket: Socket) => {
          socket.on('error', (error) => log.debug({ err: error }, 'socket error'));
          if (!makeRoom(ours, maxUnixConnections, 'unix', log)) return refuseOverCap(socket, 'unix', maxUnixConnections, log);
          // end() flushes what is queued (a closing error); destroy() follows for a peer that never reads.
          const destroy = (): void => {
            socket.end();
            setTimeout(() => socket.destroy(), 1000).unref();
          };
          const connection = serve(socket, socket, destroy, token, initializeTimeoutMs, ours);
          socket.on('close', () => void connection.close('socket closed'));
        },
        () => {
          // The token is in place before the first client can connect.
          if (!requireToken) return;
          token = createToken();
          writeTokenFile(tokenPath, token);
        },
      );
      socketPath = path;
      listeners.push({ close: listener.close, tokenPath });
      log.info({ socket: path, version: packageVersion(), epoch: identity.epoch }, 'daemon listening');
    },
    async listenTcp({ host, port, tokenFile, maxConnections = DEFAULT_MAX_TCP_CONNECTIONS, authTimeoutMs = DEFAULT_TCP_AUTH_TIMEOUT_MS }) {
      const tcpToken = readPrivateToken(tokenFile);
      // As on the unix socket: checkpointed runs are live before anyone can ask for them.
      await continuing;
      const ours = new Set<ClientConnection>();
      const listener = await listenLoopbackTcp(host, port, (socket: Socket) => {
        socket.on('error', (error) => log.debug({ err: error }, 'tcp socket error'));
        if (!makeRoom(ours, maxConnections, 'tcp', log)) return refuseOverCap(socket, 'tcp', maxConnections, log);
        // end() flushes a closing error first; destroy() follows for a peer that never reads.
        const destroy = (): void => {
          socket.end();
          setTimeout(() => socket.destroy(), 1000).unref();
        };
        // A port is reachable by any local process: it must prove it holds the token soon.
        const connection = serve(socket, socket, destroy, tcpToken, Math.min(authTimeoutMs, initializeTimeoutMs), ours);
        socket.on('close', () => void connection.close('socket closed'));
      });
      listeners.push({ close: listener.close, tokenPath: '' });
      log.info({ host, port: listener.port, maxConnections, authTimeoutMs }, 'daemon listening on loopback tcp');
      return { port: listener.port };
    },
    exitWhenIdle(idleTimeoutMs) {
      let idleSince: number | undefined;
      const timer = setInterval(() => {
        // Not `performance.now()`: the global loads node:perf_hooks (see ops/idle-memory.ts).
        const now = Number(process.hrtime.bigint()) / 1e6;
        if (connections.size > 0 || service.busy) idleSince = undefined;
        else if ((idleSince ??= now) + idleTimeoutMs <= now) {
          log.info({ idleTimeoutMs }, 'idle: no connection and no live run; shutting down');
          void daemon.close();
        }
      }, Math.max(50, Math.min(idleTimeoutMs / 4, 5000)));
      timer.unref();
      void whenClosed.then(() => clearInterval(timer));
    },
    serve(input, output, onClose) {
      const connection = serve(input, output, () => onClose?.(), undefined);
      input.on('end', () => void connection.close('input ended'));
      return connection;
    },
    close({ drain = false, timeoutMs = 30_000 } = {}) {
      closing ??= (async () => {
        log.info({ drain, timeoutMs }, 'daemon shutting down');
        await service.shutdown(drain, timeoutMs);
        // Warm agent processes are no run: the providers holding them stop them here.
        await Promise.allSettled(service.registry.all().map((provider) => provider.close?.()));
        children.close();
        await ui?.then((server) => server.close(), () => undefined);
        // Stop accepting first; a listener finishes closing only once its connections are gone.
        const stopped = listeners.map((listener) => listener.close());
        await Promise.allSettled([...connections].map((c) => c.close('daemon shut down')));
        await Promise.all(stopped);
        for (const listener of listeners) if (listener.tokenPath) rmSync(listener.tokenPath, { force: true });
        clearInterval(pruning);
        releaseLock();
        log.info(spin ? { pollSpin: spin.stats } : {}, 'daemon stopped');
        log.flush?.();
        resolveClosed();
      })();
      return closing;
    },
  };
  return daemon;
}

/** Made ours alone (prompts and tool output live here); a dir we cannot use is one clear line. */
function prepareStateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const info = statSync(dir);
    if (info.uid === process.getuid?.() && (info.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
  } catch (error) {
    throw startupFailure(error, dir);
  }
}
