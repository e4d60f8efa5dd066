/**
 * The daemons and clients the benchmarks talk to: the daemon library in this process (createDaemon
 * + listen), the real daemon process on a unix socket (the built CLI, via the test support), a
 * private stdio daemon, and clients connected to them. Everything is registered for cleanup.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { connect } from '../client/index.js';
import type { RemoteSubagentService } from '../client/index.js';
import { createDaemon, type Daemon } from '../daemon/daemon.js';
import type { AdmissionLimits } from '../daemon/store/admission-queue.js';
import type { DaemonProvider } from '../daemon/provider.js';
import { createProviders } from '../test/fixtures/test-providers.js';
import { sleep, withTimeout, type Cleanup } from './procs.js';
import { socketAccepts } from '../common/socket-probe.js';

// Where the repository, the built CLI and the fixture providers are: one answer for tests and benchmarks.
import { CLI, FIXTURE_PROVIDERS, REPO } from '../test/support/daemon-process.js';
export { CLI, FIXTURE_PROVIDERS, REPO };

export interface InProcessDaemon {
  readonly daemon: Daemon;
  readonly socket: string;
  readonly dir: string;
}

/** The daemon as a library in this process, listening on a unix socket in a fresh temp dir. */
export async function inProcessDaemon(
  cleanup: Cleanup,
  options: { admission?: Partial<AdmissionLimits>; providers?: DaemonProvider[] } = {},
): Promise<InProcessDaemon> {
  const dir = cleanup.tempDir();
  const stateDir = join(dir, 'state');
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  // The daemon's own default (pino, info level, async file destination), opened before use so
  // that a fast teardown never removes the directory under a file still being opened.
  const destination = pino.destination({ dest: join(stateDir, 'daemon.log'), sync: false });
  await once(destination, 'ready');
  const daemon = createDaemon({
    stateDir,
    log: pino({ level: 'info', base: { pid: process.pid } }, destination),
    providers: options.providers ?? createProviders(),
    detachGraceMs: 0,
    ...(options.admission !== undefined && { admission: options.admission }),
  });
  cleanup.defer('close the in-process daemon', () => daemon.close());
  const socket = join(dir, 'run', 'daemon.sock');
  await daemon.listen(socket);
  return { daemon, socket, dir };
}

export interface DaemonProcess {
  readonly pid: number;
  readonly socket: string;
  readonly dir: string;
  stderr(): string;
  /** Full GC in the daemon (SIGUSR2 to the bench host), then its RSS and heapUsed. */
  gcMemory(): Promise<{ rss: number; heapUsed: number }>;
}

const HOST = join(REPO, 'dist', 'bench', 'daemon-host.js');

/**
 * The real daemon — the built CLI's `daemon --socket …` command, entered through the bench host
 * (daemon-host.ts: the CLI plus a GC hook, under --expose-gc) — with the fixture providers loaded,
 * in a fresh temp dir; stopped with SIGTERM (SIGKILL after 5 s) at cleanup.
 */
export async function daemonProcess(
  cleanup: Cleanup,
  config: Record<string, unknown> = {},
  /** Extra node flags (the profiler's `--cpu-prof …`). */
  nodeArgs: readonly string[] = [],
  /** Extra environment (the bench host's switches, daemon-host.ts). */
  env: Readonly<Record<string, string>> = {},
): Promise<DaemonProcess> {
  if (!existsSync(CLI)) throw new Error(`build first: ${CLI} is missing`);
  const dir = cleanup.tempDir();
  const socket = join(dir, 'run', 'daemon.sock');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ providerModules: [FIXTURE_PROVIDERS], detachGraceMs: 0, ...config }));
  const child = spawn(
    process.execPath,
    [...nodeArgs, '--expose-gc', HOST, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', configPath],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SUBAGENTD_SOCKET: '', SUBAGENTD_HOME: '', SUBAGENTD_CONFIG: '', ...env } },
  );
  let stderr = '';
  let partial = '';
  const gcWaiters: Array<(memory: { rss: number; heapUsed: number }) => void> = [];
  child.stderr.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stderr = (stderr + text).slice(-8192);
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const match = /^bench-gc rss=(\d+) heapUsed=(\d+)$/.exec(line);
      if (match) gcWaiters.shift()?.({ rss: Number(match[1]), heapUsed: Number(match[2]) });
    }
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  cleanup.defer(`stop daemon pid ${child.pid}`, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
  });
  await withTimeout(
    (async () => {
      // The socket file appears at bind(), a moment before listen(): wait until a connect succeeds.
      while (!(existsSync(socket) && existsSync(`${socket}.token`) && (await socketAccepts(socket)))) {
        if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}: ${stderr}`);
        await sleep(10);
      }
    })(),
    10_000,
    `daemon start (${stderr})`,
  );
  return {
    pid: child.pid!,
    socket,
    dir: dirname(dirname(socket)),
    stderr: () => stderr,
    gcMemory: () => {
      const answer = new Promise<{ rss: number; heapUsed: number }>((resolve) => gcWaiters.push(resolve));
      child.kill('SIGUSR2');
      return withTimeout(answer, 10_000, 'daemon GC report');
    },
  };
}

export async function client(cleanup: Cleanup, socket: string, name = 'bench'): Promise<RemoteSubagentService> {
  const service = await connect({ socket, clientInfo: { name, version: '0' } });
  cleanup.defer(`close client ${name}`, () => service.close());
  return service;
}

export async function clients(cleanup: Cleanup, socket: string, count: number, name = 'bench'): Promise<RemoteSubagentService[]> {
  const out: RemoteSubagentService[] = [];
  for (let i = 0; i < count; i++) out.push(await client(cleanup, socket, `${name}-${i}`));
  return out;
}

/** A private daemon on stdio (`daemon --stdio`), owned by the returned client. */
export async function stdioClient(cleanup: Cleanup, config: Record<string, unknown> = {}): Promise<RemoteSubagentService> {
  const dir = cleanup.tempDir();
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ providerModules: [FIXTURE_PROVIDERS], ...config }));
  const service = await connect({
    spawn: 'stdio',
    args: [CLI, 'daemon', '--stdio', '--state-dir', join(dir, 'state'), '--config', configPath],
    stderr: 'ignore',
    clientInfo: { name: 'bench-stdio', version: '0' },
    env: { ...process.env, SUBAGENTD_SOCKET: '', SUBAGENTD_HOME: '', SUBAGENTD_CONFIG: '' },
  });
  cleanup.defer('close the stdio daemon', () => service.close());
  return service;
}


export const abortSignal = (): AbortSignal => new AbortController().signal;
