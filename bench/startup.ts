/**
 * Section 5, start-up: what a daemon costs before it does any work. Each sample is a fresh
 * process, alternated pair by pair with its floors, so a change in the machine's load hits every
 * row alike. Floors: bare `node -e 0`, bare node listening on a unix socket (spawn → accepting,
 * the same probe as the daemon's), and the same with the libraries the daemon must run on loaded
 * (pino, vscode-jsonrpc): the RSS below which no daemon on them can start. Figures: the import of the daemon library; the daemon command
 * from spawn to accepting connections with the compile cache warm (every start after the first)
 * and empty (the first start), with its CPU time and RSS at that moment. The daemon turns the
 * cache on only once it accepts (cli/daemon-command.ts), so the two rows should agree: a gap
 * between them means start-up code is cached again. A last daemon row starts it with Prometheus
 * metrics on: what observability costs a start, beside the default (off) it is compared with.
 * CPU time is the steadier figure on a loaded machine: wall time includes waiting for a core.
 * Then one daemon's idle RSS after start and after `runs` trivial echo runs: right after, once
 * the daemon has given memory back (it does after IDLE_RELEASE_WAIT_MS of quiet), and after a
 * full GC.
 *
 * "Idle RSS" (the target) is the daemon command's RSS at the moment it first accepts a connection,
 * warm cache, empty config: the daemon has loaded everything it serves with and released what
 * start-up left (cli/daemon-command.ts), and nothing has connected. It is also split into
 * anonymous memory (heap, malloc: this process's own) and file-backed pages (the node binary's
 * code and data it touched, shared by every node process but counted in each one's RSS).
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ContentBlock } from '../protocol/index.js';
import { abortSignal, CLI, client, daemonProcess, REPO } from './daemons.js';
import { anonRssOf, Cleanup, cpuSecondsOf, rssOf, sleep, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { bytes, ms, summarize } from './stats.js';
import { Table } from './table.js';
import { socketAccepts } from '../common/socket-probe.js';

export interface StartupOptions {
  /** Alternating pairs per figure. */
  readonly pairs: number;
  /** Trivial runs before the daemon's idle RSS is read again; 0 leaves that table out (its quiet waits take 5 s). */
  readonly runs: number;
}

/** Wall time of one `node -e <code>` process, in ms. */
function nodeProcessMs(code: string): number {
  const started = performance.now();
  execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: REPO, stdio: 'ignore' });
  return performance.now() - started;
}

interface ColdStart {
  /** Spawn → first accepted connection. */
  readonly ms: number;
  /** CPU (user + system) the process had used by then. */
  readonly cpuMs: number;
  readonly rss: number;
  /** The anonymous part of `rss`. */
  readonly anon: number;
}

/** Quiet time after which the daemon has given memory back (its 2 s, plus its 1 s check, plus margin). */
const IDLE_RELEASE_WAIT_MS = 4000;

/** Spawns `args` (which must listen on `socket`), waits until it accepts, measures, kills it. */
async function coldStart(args: string[], socket: string, env: NodeJS.ProcessEnv): Promise<ColdStart> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { stdio: 'ignore', env });
  try {
    await withTimeout(
      (async () => {
        while (!(existsSync(socket) && (await socketAccepts(socket)))) {
          if (child.exitCode !== null) throw new Error(`${args[0]} exited with ${child.exitCode}`);
          await sleep(2);
        }
      })(),
      20_000,
      'cold start',
    );
    return { ms: performance.now() - started, cpuMs: cpuSecondsOf(child.pid!) * 1000, rss: rssOf(child.pid!), anon: anonRssOf(child.pid!) };
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) => (child.exitCode === null && child.signalCode === null ? child.once('exit', resolve) : resolve(undefined)));
  }
}

/** Bare node listening on a unix socket: the floor of any daemon's spawn → accepting. */
function socketFloor(cleanup: Cleanup): Promise<ColdStart> {
  const socket = join(cleanup.tempDir(), 'floor.sock');
  return coldStart(['-e', 'require("node:net").createServer().listen(process.argv[1])', socket], socket, { PATH: process.env['PATH'] ?? '' });
}

const resolveDependency = createRequire(import.meta.url).resolve;

/**
 * Bare node on a socket, as an ES module like the daemon, with the two libraries the daemon must
 * run on (the mission names them: pino logs its start, vscode-jsonrpc carries its wire) loaded
 * first, under the daemon's own
 * start-up hold of the optimizing compiler (cli/startup-compiler.ts) and with its memory release
 * before serving: the least RSS any daemon built on them can accept connections with, before a
 * line of its own code.
 */
function dependencyFloor(cleanup: Cleanup): Promise<ColdStart> {
  const socket = join(cleanup.tempDir(), 'deps.sock');
  // An ES module that takes the two CommonJS packages with `require`, as the daemon does.
  const code = [
    'import { createRequire } from "node:module"',
    'const require = createRequire(import.meta.url)',
    'const v8 = require("node:v8")',
    'v8.setFlagsFromString("--no-turbofan")',
    `require(${JSON.stringify(resolveDependency('pino'))})`,
    `require(${JSON.stringify(resolveDependency('vscode-jsonrpc/node'))})`,
    // The daemon's release before serving (daemon/ops/idle-memory.ts), the same way.
    'v8.setFlagsFromString("--expose-gc")',
    'require("node:vm").runInNewContext("gc")({ type: "major", execution: "sync", flavor: "last-resort" })',
    'require("node:net").createServer().listen(process.argv[1], () => v8.setFlagsFromString("--turbofan"))',
  ].join(';');
  return coldStart(['--input-type=module', '-e', code, socket], socket, { PATH: process.env['PATH'] ?? '' });
}

/** The daemon command with an empty config (or `settings`); its compile cache lives in `cacheHome`. */
function daemonStart(cleanup: Cleanup, cacheHome: string, settings: Record<string, unknown> = {}): Promise<ColdStart> {
  const dir = cleanup.tempDir();
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify(settings));
  const args = [CLI, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config];
  return coldStart(args, socket, { PATH: process.env['PATH'] ?? '', HOME: dir, XDG_CACHE_HOME: cacheHome });
}

/** The config that turns Prometheus metrics on (any free loopback port): the startup rows' "observability on". */
const METRICS_ON = { metrics: { address: '127.0.0.1:0' } };

interface Row {
  readonly what: string;
  readonly samples: ColdStart[];
}

export async function startupBench(report: Report, cleanup: Cleanup, options: StartupOptions): Promise<void> {
  report.section(
    '5. Start-up',
    'Fresh processes, each figure alternated pair by pair with its floors (bare `node -e 0`; bare node listening on a unix socket; the same as an ES module ' +
      'with pino and vscode-jsonrpc, the libraries the daemon must run on, loaded as the daemon loads them) so load changes hit all. ' +
      'The daemon command runs with an empty config file. "Warm" is every start after the first (Node\'s compile cache, kept per user, holds what earlier starts compiled); ' +
      '"empty cache" is a first start. The daemon compiles its start-up code without the cache and turns it on once it accepts (Node holds every cache entry in memory), so the two should agree. ' +
        '"Metrics on" is the warm start with Prometheus metrics served (config `metrics.address`): off, as in the other daemon rows, neither daemon/telemetry/ nor prom-client loads, and without OTEL_* variables neither does the tracing SDK. ' +
      'The SDKs of the openai-compatible model and of ACP, the client side and the search engine load when first used, not here.',
  );
  const bare: number[] = [];
  const library: number[] = [];
  const warmCache = cleanup.tempDir();
  await daemonStart(cleanup, warmCache); // unmeasured: fills the warm cache
  const floor: ColdStart[] = [];
  const deps: ColdStart[] = [];
  const warm: ColdStart[] = [];
  const empty: ColdStart[] = [];
  // Observability on: what `--metrics` costs a start (prom-client and daemon/telemetry/ load; off, neither does).
  const metrics: ColdStart[] = [];
  const daemonIndex = join(REPO, 'dist', 'daemon', 'index.js');
  for (let pair = 0; pair < options.pairs; pair++) {
    bare.push(nodeProcessMs('0'));
    library.push(nodeProcessMs(`await import(${JSON.stringify(daemonIndex)})`));
    floor.push(await socketFloor(cleanup));
    deps.push(await dependencyFloor(cleanup));
    warm.push(await daemonStart(cleanup, warmCache));
    empty.push(await daemonStart(cleanup, cleanup.tempDir()));
    metrics.push(await daemonStart(cleanup, warmCache, METRICS_ON));
  }
  const b = summarize(bare);
  const l = summarize(library);
  const table = new Table(`Start-up, ${options.pairs} alternating pairs (median, min–max)`, ['what', 'wall', 'min – max', 'over its floor (median)', 'CPU', 'RSS at accepting', 'of which anonymous']);
  table.row('bare `node -e 0`', ms(b.p50), `${ms(b.min)} – ${ms(b.max)}`, '—', '—', '—', '—');
  table.row('`import("dist/daemon/index.js")` (the whole library)', ms(l.p50), `${ms(l.min)} – ${ms(l.max)}`, `${ms(l.p50 - b.p50)} over bare node`, '—', '—', '—');
  const f = summarize(floor.map((s) => s.ms));
  const rows: Row[] = [
    { what: 'floor: bare node listening on a unix socket, spawn → accepting', samples: floor },
    { what: 'floor: the same as an ES module with pino and vscode-jsonrpc loaded (the libraries the daemon runs on)', samples: deps },
    { what: 'daemon command, warm cache: spawn → accepting connections', samples: warm },
    { what: 'daemon command, empty cache (first start): spawn → accepting', samples: empty },
    { what: 'daemon command, warm cache, metrics on (`metrics.address`, as `--metrics`): spawn → accepting', samples: metrics },
  ];
  for (const row of rows) {
    const t = summarize(row.samples.map((s) => s.ms));
    const cpu = summarize(row.samples.map((s) => s.cpuMs));
    const rss = summarize(row.samples.map((s) => s.rss));
    const anon = summarize(row.samples.map((s) => s.anon));
    const over = row.samples === floor ? `${ms(t.p50 - b.p50)} over bare node` : `${ms(t.p50 - f.p50)} over the socket floor`;
    table.row(row.what, ms(t.p50), `${ms(t.min)} – ${ms(t.max)}`, over, `${ms(cpu.p50)} (${ms(cpu.min)} – ${ms(cpu.max)})`, `${bytes(rss.p50)} (${bytes(rss.min)} – ${bytes(rss.max)})`, bytes(anon.p50));
  }
  const w = summarize(warm.map((s) => s.ms));
  const r = summarize(warm.map((s) => s.rss));
  const floorRss = summarize(floor.map((s) => s.rss));
  const a = summarize(warm.map((s) => s.anon));
  const floorAnon = summarize(floor.map((s) => s.anon));
  const depsRss = summarize(deps.map((s) => s.rss));
  table.note(
    `Idle RSS is the daemon command's at accepting (warm cache, empty config): ${bytes(r.p50)}, of which ${bytes(a.p50)} anonymous ` +
      `(heap and malloc) and ${bytes(r.p50 - a.p50)} file-backed (the node binary's pages it touched); bare node on a socket: ` +
      `${bytes(floorRss.p50)}, of which ${bytes(floorAnon.p50)} anonymous. As an ES module with pino and vscode-jsonrpc loaded, ` +
      `under the daemon's start-up compiler hold and memory release, it holds ${bytes(depsRss.p50)}: what any daemon on those ` +
      `two libraries starts from. The daemon's own code and state come to ${bytes(r.p50 - depsRss.p50)} on top.`,
  );
  report.table(table);
  report.verdict('daemon library import ≤ 0.25 s over bare node', `${ms(l.p50 - b.p50)} over`, l.p50 - b.p50 <= 250);
  report.verdict('daemon command spawn → accepting ≤ 0.25 s over bare node on a socket (warm cache)', `${ms(w.p50 - f.p50)} over`, w.p50 - f.p50 <= 250);
  report.verdict('daemon idle RSS ≤ 50 MiB', `${bytes(r.p50)} (bare node on a socket: ${bytes(floorRss.p50)}; an ES module with pino and vscode-jsonrpc: ${bytes(depsRss.p50)})`, r.p50 <= 50 * 1024 * 1024);
  if (options.runs > 0) await idleMemory(report, cleanup, options.runs);
}

/** Idle RSS of one daemon (the bench host, fixture providers) after start and after `runs` echo runs. */
async function idleMemory(report: Report, cleanup: Cleanup, runs: number): Promise<void> {
  const daemon = await daemonProcess(cleanup);
  await sleep(500);
  const atStart = rssOf(daemon.pid);
  const service = await client(cleanup, daemon.socket, 'startup-idle');
  const parent = { sessionId: 'bench-parent', cwd: cleanup.tempDir() };
  const prompt: ContentBlock[] = [{ type: 'text', text: 'echo idle' }];
  for (let i = 0; i < runs; i++) {
    const run = await service.start('echo', { prompt, parent, signal: abortSignal() });
    await run.result;
    await run.dispose();
  }
  await service.close();
  await sleep(500);
  const afterRuns = rssOf(daemon.pid);
  await sleep(IDLE_RELEASE_WAIT_MS - 500);
  const released = rssOf(daemon.pid);
  const gc = await daemon.gcMemory();
  const table = new Table('Idle daemon memory (one daemon process, fixture providers)', ['when', 'RSS', 'heap used']);
  table.row('idle after start (0.5 s after accepting)', bytes(atStart), '—');
  table.row(`0.5 s after ${runs} trivial runs (one client, start → result → dispose), client gone`, bytes(afterRuns), '—');
  table.row(`${IDLE_RELEASE_WAIT_MS / 1000} s after them (the daemon has given memory back)`, bytes(released), '—');
  table.row('the same after a full GC', bytes(gc.rss), bytes(gc.heapUsed));
  report.table(table);
}
