/** `subagentd daemon [--stdio]`: run the daemon in the foreground until stopped. */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createBuiltinProviders } from '../builtin-providers.js';
import { ConfigError } from '../config.js';
import { createDaemon } from '../daemon.js';
import { createLogger } from '../logger.js';
import { stateFiles } from '../paths.js';
import { installProcessGuards } from '../process-guards.js';
import { loadProviderModules } from '../provider-modules.js';
import { commonSettings, parse } from './options.js';

export async function daemonCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    stdio: { type: 'boolean' },
    'log-level': { type: 'string' },
    'max-runs': { type: 'string' },
    'max-runs-per-connection': { type: 'string' },
    'idle-timeout': { type: 'string' },
  });
  const shared = commonSettings(values);
  const stdio = values['stdio'] === true;
  // A private stdio daemon with no state dir of its own must not contend for the shared
  // daemon's: it gets a scratch one under it, removed when it exits.
  const explicitState = values['state-dir'] !== undefined || process.env['SUBAGENTD_HOME'] || shared.config.stateDir;
  const scratch = stdio && !explicitState ? privateStateDir(shared.stateDir) : undefined;
  const settings = scratch ? { ...shared, stateDir: scratch } : shared;
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  const log = createLogger({
    file: stateFiles(settings.stateDir).log,
    level: (values['log-level'] as string | undefined) ?? process.env['SUBAGENTD_LOG_LEVEL'] ?? 'info',
    stderr: !stdio || process.env['SUBAGENTD_STDERR_LOG'] === '1',
  });
  const providers = [
    ...createBuiltinProviders(settings.config, settings.stateDir, log),
    ...(await loadProviderModules(settings.config.providerModules ?? [], { stateDir: settings.stateDir, config: settings.config, log })),
  ];
  const daemon = createDaemon({
    stateDir: settings.stateDir,
    providers,
    log,
    requireToken: settings.config.requireToken ?? true,
    ...(settings.config.detachGraceMs !== undefined && { detachGraceMs: settings.config.detachGraceMs }),
    ...(settings.config.sessionRetentionDays !== undefined && { sessionRetentionDays: settings.config.sessionRetentionDays }),
    ...(settings.config.limits?.maxOutputBytes !== undefined && { maxOutputBytes: settings.config.limits.maxOutputBytes }),
    ...(settings.config.retention !== undefined && { retention: settings.config.retention }),
    admission: {
      ...settings.config.limits,
      ...(values['max-runs'] !== undefined && { maxConcurrentRuns: positiveInt(values['max-runs'], '--max-runs') }),
      ...(values['max-runs-per-connection'] !== undefined && {
        maxRunsPerConnection: positiveInt(values['max-runs-per-connection'], '--max-runs-per-connection'),
      }),
    },
    ...(settings.config.maxFrameBytes !== undefined && { frameLimits: { maxFrameBytes: settings.config.maxFrameBytes } }),
    ...(settings.config.maxConnections !== undefined && { maxConnections: settings.config.maxConnections }),
    ...(settings.config.maxUnsentBytes !== undefined && { maxUnsentBytes: settings.config.maxUnsentBytes }),
  });
  installProcessGuards({ log, close: () => daemon.close() });
  const stop = (signal: string): void => {
    log.info({ signal }, 'signal received');
    void daemon.close();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  try {
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
    await daemon.close();
    throw error;
  }
  const idleSeconds = values['idle-timeout'];
  const idleMs = idleSeconds !== undefined ? positiveInt(idleSeconds, '--idle-timeout') * 1000 : settings.config.idleTimeoutMs;
  if (idleMs !== undefined) daemon.exitWhenIdle(idleMs);
  await daemon.whenClosed;
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  return 0;
}

function positiveInt(value: string | boolean | undefined, flag: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigError(`${flag} must be a positive integer, got ${String(value)}`);
  return n;
}

function privateStateDir(sharedStateDir: string): string {
  const parent = join(sharedStateDir, 'private');
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  return mkdtempSync(join(parent, 'stdio-'));
}
