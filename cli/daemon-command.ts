/** `subagentd daemon [--stdio]`: run the daemon in the foreground until stopped. */
import { mkdirSync, mkdtempSync, rmSync } from '../common/node-builtins.js';
import { join } from 'node:path';
import { createBuiltinProviders } from '../daemon/builtin-providers.js';
import { ConfigError, type DaemonConfig } from '../daemon/config.js';
import { createDaemon, type Daemon } from '../daemon/daemon.js';
import { DaemonSettings } from '../daemon/ops/reload.js';
import { Upstream } from '../daemon/upstream/upstream.js';
import { DEFAULT_ADMISSION_LIMITS } from '../daemon/store/admission-queue.js';
import { createLogger } from '../daemon/ops/logger.js';
import { stateFiles } from '../daemon/ops/paths.js';
import { installProcessGuards } from '../daemon/ops/process-guards.js';
import { releaseMemory, releaseMemoryWhenIdle, type Released } from '../daemon/ops/idle-memory.js';
import { loadProviderModules } from '../daemon/provider-modules.js';
import { secretNames, takeSecrets } from '../daemon/ops/secrets.js';
import { startupFailure } from '../daemon/ops/startup-error.js';
import { StateFaults } from '../daemon/store/state-faults.js';
import { enableCompileCache } from './compile-cache.js';
import { releaseOptimizingCompiler } from './startup-compiler.js';
import { commonSettings, DAEMON_FLAGS, LOG_LEVELS, parse } from './options.js';
import type { Cluster } from '../daemon/cluster/cluster.js';

export async function daemonCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, DAEMON_FLAGS);
  const shared = commonSettings(values);
  const stdio = values['stdio'] === true;
  try {
    mkdirSync(shared.stateDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw startupFailure(error, shared.stateDir);
  }
  // First, before anything is opened or spawned: this may re-execute the process without them.
  const secrets = takeSecrets(secretNames(shared.config), shared.stateDir);
  // A private stdio daemon with no state dir of its own must not contend for the shared
  // daemon's: it gets a scratch one under it, removed when it exits.
  const explicitState = values['state-dir'] !== undefined || process.env['SUBAGENTD_HOME'] || shared.config.stateDir;
  const scratch = stdio && !explicitState ? privateStateDir(shared.stateDir) : undefined;
  const settings = scratch ? { ...shared, stateDir: scratch } : shared;
  try {
    mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw startupFailure(error, settings.stateDir);
  }
  const level = (values['log-level'] as string | undefined) ?? process.env['SUBAGENTD_LOG_LEVEL'] ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new ConfigError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${level}"`);
  // One record of the state dir's write faults, fed by the log and the run index alike.
  const faults = new StateFaults();
  const log = createLogger({
    file: stateFiles(settings.stateDir).log,
    level,
    stderr: !stdio || process.env['SUBAGENTD_STDERR_LOG'] === '1',
    faults,
  });
  // Our own stderr lines (below) go to a file for an auto-started daemon: a full disk must not crash us.
  process.stderr.on('error', (error) => log.warn({ err: error }, 'stderr write failed'));
  if (secrets.warning) log.warn(secrets.warning);
  // The secrets taken out of the environment above are the model's, on every (re)load.
  const env = { ...process.env, ...secrets.values };
  // Reloadable: the model settings and ACP providers follow `subagentd reload` / SIGHUP.
  // One governor per model endpoint for every child of every client (daemon/upstream/).
  const upstream = new Upstream(settings.config.endpoints);
  const { lineageTokens, clientTokensPerDay } = settings.config.limits ?? {};
  // Token budgets (and their module) only when a limit asks for them.
  const budgets =
    lineageTokens !== undefined || clientTokensPerDay !== undefined
      ? new (await import('../daemon/upstream/token-budgets.js')).TokenBudgets(join(settings.stateDir, 'token-usage.json'), { lineageTokens, clientTokensPerDay })
      : undefined;
  const reloadable = new DaemonSettings(settings.configPath, settings.config, settings.stateDir, env, log, upstream);
  // Nested delegation: spawn/fork children get the subagent tool, mounted once the service exists.
  // It and the tool (about 10 modules) load only when configured.
  const delegation = settings.config.delegation
    ? new (await import('../daemon/service/delegation.js')).Delegation(settings.config.delegation)
    : undefined;
  // With `tools.shell`, the sandbox is settled now: no working bwrap and no explicit
  // `tools.shellUnsandboxed` means no daemon (the sandbox module loads only here).
  const tools = settings.config.tools;
  const shellLauncher = tools?.shell
    ? await (await import('../daemon/sandbox/shell-launcher.js')).prepareShell(
        { unsandboxed: tools.shellUnsandboxed ?? false, readOnly: tools.shellReadOnly ?? [], network: tools.shellNetwork ?? false },
        {
          stateDir: settings.stateDir,
          socket: settings.socket,
          env,
          envFile: reloadable.envFile,
          ...(settings.configPath !== undefined && { configPath: settings.configPath }),
          ...(settings.config.tcp && { tcpTokenFile: settings.config.tcp.tokenFile }),
        },
      )
    : undefined;
  const [spawnProvider, forkProvider] = createBuiltinProviders(
    { ...settings.config, providers: [] },
    settings.stateDir,
    log,
    env,
    reloadable.resolveModel,
    delegation,
    shellLauncher,
  );
  const providers = [
    spawnProvider!,
    forkProvider!,
    ...(await loadProviderModules(settings.config.providerModules ?? [], { stateDir: settings.stateDir, config: settings.config, log })),
  ];
  const admission = {
    ...settings.config.limits,
    ...(values['max-runs'] !== undefined && { maxConcurrentRuns: positiveInt(values['max-runs'], '--max-runs') }),
    ...(values['max-runs-per-connection'] !== undefined && {
      maxRunsPerConnection: positiveInt(values['max-runs-per-connection'], '--max-runs-per-connection'),
    }),
  };
  // Cluster mode: starts go to the shared queue on NATS and this member executes runs from it.
  // Unreachable NATS is fatal here, before the state dir is locked: the daemon never half-joins.
  // The NATS client (about 70 modules) loads only here: a daemon outside a cluster never pays for it.
  const natsUrl = (values['nats'] as string | undefined) ?? process.env['SUBAGENTD_NATS'] ?? settings.config.cluster?.nats;
  const cluster =
    natsUrl === undefined
      ? undefined
      : await (await import('../daemon/cluster/cluster.js')).Cluster.join(
          {
            url: natsUrl,
            cap: admission.maxConcurrentRuns ?? DEFAULT_ADMISSION_LIMITS.maxConcurrentRuns,
            sessionsDir: stateFiles(settings.stateDir).sessions,
            log,
            ...(settings.config.cluster?.ackWaitMs !== undefined && { ackWaitMs: settings.config.cluster.ackWaitMs }),
            ...(settings.config.cluster?.slots !== undefined && { slots: settings.config.cluster.slots }),
            ...(settings.config.cluster?.prefix !== undefined && { prefix: settings.config.cluster.prefix }),
            ...(settings.config.cluster?.workspaces !== undefined && { workspaces: settings.config.cluster.workspaces }),
            ...(settings.config.cluster?.workspaceWaitMs !== undefined && { workspaceWaitMs: settings.config.cluster.workspaceWaitMs }),
            ...(settings.config.limits?.maxOutputBytes !== undefined && { maxOutputBytes: settings.config.limits.maxOutputBytes }),
            ...(settings.config.limits?.idempotencyWindowMs !== undefined && { idempotencyWindowMs: settings.config.limits.idempotencyWindowMs }),
            ...(settings.config.retention?.runs?.maxAgeDays !== undefined && { runRetentionDays: settings.config.retention.runs.maxAgeDays }),
          },
          providers,
        );
  if (cluster) {
    // One limit for the whole pool: each endpoint's limit state (adaptive limit, pauses, windows) in JetStream KV (kv-shared-limit.ts).
    const { KvPermits } = await import('../daemon/upstream/kv-shared-limit.js');
    const permits = await KvPermits.open(cluster.link.js, `${settings.config.cluster?.prefix ?? 'subagentd'}_upstream`);
    upstream.share((id) => permits.limit(id));
  }
  const daemon = createDaemon({
    ...(delegation && { delegation }),
    stateDir: settings.stateDir,
    providers: cluster ? cluster.wrap(providers) : providers,
    ...(cluster && { ledger: (local) => cluster.ledger(local), startKeys: cluster.startKeys }),
    log,
    faults,
    requireToken: settings.config.requireToken ?? true,
    ...(settings.config.detachGraceMs !== undefined && { detachGraceMs: settings.config.detachGraceMs }),
    ...(settings.config.pollSpinMicros !== undefined && { pollSpinMicros: settings.config.pollSpinMicros }),
    ...(settings.config.sessionRetentionDays !== undefined && { sessionRetentionDays: settings.config.sessionRetentionDays }),
    ...(settings.config.limits?.maxOutputBytes !== undefined && { maxOutputBytes: settings.config.limits.maxOutputBytes }),
    ...(settings.config.limits?.idempotencyWindowMs !== undefined && { idempotencyWindowMs: settings.config.limits.idempotencyWindowMs }),
    ...(settings.config.retention !== undefined && { retention: settings.config.retention }),
    admission,
    ...(settings.config.maxFrameBytes !== undefined && { frameLimits: { maxFrameBytes: settings.config.maxFrameBytes } }),
    ...(settings.config.maxConnections !== undefined && { maxConnections: settings.config.maxConnections }),
    ...(settings.config.limits?.preAuthBytes !== undefined && { preAuthBytes: settings.config.limits.preAuthBytes }),
    ...(settings.config.limits?.preAuthTotalBytes !== undefined && { preAuthTotalBytes: settings.config.limits.preAuthTotalBytes }),
    ...(settings.config.maxUnsentBytes !== undefined && { maxUnsentBytes: settings.config.maxUnsentBytes }),
    settingsStatus: () => reloadable.status(),
    worktrees: {
      ...(settings.config.worktrees?.dir !== undefined && { dir: settings.config.worktrees.dir }),
      ...(settings.config.worktrees?.commit !== undefined && { commit: settings.config.worktrees.commit }),
      ...(settings.config.worktrees?.cleanup !== undefined && { cleanup: settings.config.worktrees.cleanup }),
      ...(settings.config.worktrees?.providers !== undefined && { defaults: settings.config.worktrees.providers }),
      // In a cluster the worktree is made by the member that executes the run (isolateWith below).
      ...(cluster && { carried: true }),
    },
    ...(shellLauncher && { shell: shellLauncher.mode }),
    upstream,
    ...(budgets && { budgets }),
  });
  if (cluster) {
    cluster.isolateWith(daemon.worktrees.isolate);
    // Worktrees this member's previous life made for the pool's runs have nobody to continue them now.
    void daemon.worktrees
      .orphanPoolWorktrees(cluster.worker.id)
      .then((names) => names.length > 0 && log.warn({ worktrees: names }, 'worktrees of pool runs a previous life of this member executed are orphaned: `subagentd worktrees prune` removes them'))
      .catch((error: unknown) => log.warn({ err: error }, 'could not read the worktree records'));
  }
  // In a cluster the ACP providers (configured or reloaded) join the pool like the others.
  reloadable.attach(daemon.service.registry, cluster && ((provider) => cluster.adopt(provider)));
  cluster?.stopsWith(() => daemon.service.isShuttingDown);
  process.on('SIGHUP', () => {
    try {
      reloadable.reload();
    } catch (error) {
      // The settings in force stay; `subagentd reload` reads this from the log and status.
      log.error({ err: error }, 'reload failed: the previous settings stay in force');
    }
  });
  // Node's compile cache from here on only: what loads at first use (the agent runtime, the SDKs)
  // is cached, the start-up's own modules are not. Node keeps every entry of the cache in memory
  // for the life of the process: for the ~140 start-up modules ~1 MiB of an idle daemon's RSS,
  // against ~20 ms of CPU once per start that compiling them costs (docs/architecture.md).
  enableCompileCache();
  // Loading all that left garbage and a young generation sized for it: collect before serving,
  // so an idle daemon holds only what it uses (see idle-memory.ts), and again after each busy spell.
  logReleased(log, 'start', releaseMemory());
  // Start-up is over: code that gets hot from here on is serving code, worth optimizing.
  releaseOptimizingCompiler();
  const stopReleasing = releaseMemoryWhenIdle({
    quietMs: IDLE_RELEASE_QUIET_MS,
    busy: () => daemon.service.busy,
    onRelease: (released) => logReleased(log, 'idle', released),
  });
  void daemon.whenClosed.then(stopReleasing);
  installProcessGuards({ log, close: () => daemon.close() });
  const stop = (signal: string): void => {
    log.info({ signal }, 'signal received');
    void daemon.close();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // Telemetry (daemon/telemetry/) loads only when asked for: off, none of it (nor prom-client) is read.
  const metricsAddress = (values['metrics'] as string | undefined) ?? settings.config.metrics?.address;
  let stopMetrics: (() => Promise<void>) | undefined;
  const traced = await startTracingIfAsked(env, settings.config.tracing, daemon, cluster);
  try {
    if (metricsAddress !== undefined) {
      const { serveMetrics, parseListenAddress } = await import('../daemon/telemetry/metrics-server.js');
      const listen = parseListenAddress(metricsAddress, '--metrics');
      const served = await serveMetrics(daemon, {
        ...listen,
        ...(settings.config.metrics?.allowRemote !== undefined && { allowRemote: settings.config.metrics.allowRemote }),
      });
      stopMetrics = served.close;
      process.stderr.write(`subagentd metrics at http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${served.port}/metrics\n`);
    }
    if (stdio) {
      // One private client on stdio: when it goes, so does the daemon.
      daemon.serve(process.stdin, process.stdout, () => void daemon.close());
    } else {
      // TCP first: the unix socket's token file is the signal that the daemon is ready, on both.
      const tcp = settings.config.tcp;
      if (tcp) {
        const { port } = await daemon.listenTcp({
          host: tcp.host ?? '127.0.0.1',
          port: tcp.port,
          tokenFile: tcp.tokenFile,
          ...(tcp.maxConnections !== undefined && { maxConnections: tcp.maxConnections }),
          ...(tcp.authTimeoutMs !== undefined && { authTimeoutMs: tcp.authTimeoutMs }),
        });
        process.stderr.write(`subagentd also listening on ${tcp.host ?? '127.0.0.1'}:${port} (bearer token required)\n`);
      }
      await daemon.listen(settings.socket);
      process.stderr.write(`subagentd ${daemon.identity.version} listening on ${settings.socket} (pid ${process.pid})\n`);
    }
  } catch (error) {
    // Half-started: release the socket, the lock and the log before reporting.
    await stopMetrics?.();
    await daemon.close();
    await traced?.shutdown();
    await cluster?.close();
    throw error;
  }
  if (cluster) {
    cluster.start();
    process.stderr.write(`subagentd member ${cluster.worker.id} joined the cluster at ${natsUrl}\n`);
  }
  const idleSeconds = values['idle-timeout'];
  const idleMs = idleSeconds !== undefined ? positiveInt(idleSeconds, '--idle-timeout') * 1000 : settings.config.idleTimeoutMs;
  if (idleMs !== undefined) daemon.exitWhenIdle(idleMs);
  await daemon.whenClosed;
  await stopMetrics?.();
  // The runs' last spans were ended by the close: exported before the process goes.
  await traced?.shutdown().catch((error: unknown) => log.warn({ err: error }, 'tracing: the last export failed'));
  // After the service disposed this member's runs (their executors were told over NATS); bounded
  // by the exit timer below, so a member whose NATS server is gone still exits.
  const leaving = cluster?.close().catch((error: unknown) => log.warn({ err: error }, 'cluster: leaving failed'));
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  // Closed: socket, lock and log are released. Whatever still holds the event loop (a peer's
  // half-closed socket, a provider's stray timer) must not keep the process alive, because
  // `subagentd stop` returns only once the process has exited.
  setTimeout(() => process.exit(process.exitCode ?? 0), 2000).unref();
  await leaving;
  return 0;
}

/**
 * Traces (daemon/telemetry/tracing.ts) when the OTEL_* variables or the config ask for them; the
 * OpenTelemetry SDK is not even loaded otherwise.
 */
async function startTracingIfAsked(
  env: Readonly<Record<string, string | undefined>>,
  config: DaemonConfig['tracing'],
  daemon: Daemon,
  cluster: Pick<Cluster, 'observeExecutions'> | undefined,
): Promise<{ shutdown(): Promise<void> } | undefined> {
  if (config === undefined && env['OTEL_TRACES_EXPORTER'] === undefined && env['OTEL_EXPORTER_OTLP_ENDPOINT'] === undefined && env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] === undefined) {
    return undefined;
  }
  const tracing = await import('../daemon/telemetry/tracing.js');
  const settings = tracing.tracingSettings(env, config);
  if (!settings) return undefined;
  const started = await tracing.startTracing(settings, daemon.identity.version);
  daemon.service.observe(started.observer);
  cluster?.observeExecutions(started.executions);
  daemon.log.info({ protocol: settings.protocol, url: settings.url ?? 'from OTEL_* variables' }, 'exporting traces over OTLP/HTTP');
  return started;
}

/** Quiet time after work before the daemon gives memory back: short next to a user's pause, long next to a burst's gaps. */
const IDLE_RELEASE_QUIET_MS = 2000;

function logReleased(log: { debug(object: object, message: string): void }, when: string, released: Released | undefined): void {
  if (released) log.debug({ when, rssBefore: released.rssBefore, rssAfter: released.rssAfter, ms: Math.round(released.ms * 10) / 10 }, 'memory released');
}

function positiveInt(value: string | boolean | undefined, flag: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigError(`${flag} must be a positive integer, got ${String(value)}`);
  return n;
}

function privateStateDir(sharedStateDir: string): string {
  const parent = join(sharedStateDir, 'private');
  try {
    mkdirSync(parent, { recursive: true, mode: 0o700 });
    return mkdtempSync(join(parent, 'stdio-'));
  } catch (error) {
    throw startupFailure(error, parent);
  }
}
