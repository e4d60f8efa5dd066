/**
 * Section 5, start-up: what a daemon costs before it does any work. Each sample is a fresh
 * process, alternated pair by pair with its floors, so a change in the machine's load hits every
 * row alike. Floors: bare `node -e 0`, and bare node listening on a unix socket (spawn → accepting,
 * the same probe as the daemon's). Figures: the import of the daemon library; the daemon command
 * from spawn to accepting connections with the compile cache warm (every start after the first)
 * and empty (the first start, which also writes it), with its CPU time and RSS at that moment.
 * CPU time is the steadier figure on a loaded machine: wall time includes waiting for a core.
 * Then one daemon's idle RSS after start and after `runs` trivial echo runs, before and after a
 * full GC.
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ContentBlock } from '../protocol/index.js';
import { abortSignal, CLI, client, daemonProcess, REPO } from './daemons.js';
import { Cleanup, cpuSecondsOf, rssOf, sleep, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { bytes, ms, summarize } from './stats.js';
import { Table } from './table.js';
import { socketAccepts } from '../common/socket-probe.js';

export interface StartupOptions {
  /** Alternating pairs per figure. */
  readonly pairs: number;
  /** Trivial runs before the daemon's idle RSS is read again. */
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
}

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
    return { ms: performance.now() - started, cpuMs: cpuSecondsOf(child.pid!) * 1000, rss: rssOf(child.pid!) };
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

/** The daemon command with an empty config; its compile cache lives in `cacheHome`. */
function daemonStart(cleanup: Cleanup, cacheHome: string): Promise<ColdStart> {
  const dir = cleanup.tempDir();
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  writeFileSync(config, '{}');
  const args = [CLI, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config];
  return coldStart(args, socket, { PATH: process.env['PATH'] ?? '', HOME: dir, XDG_CACHE_HOME: cacheHome });
}

interface Row {
  readonly what: string;
  readonly samples: ColdStart[];
}

export async function startupBench(report: Report, cleanup: Cleanup, options: StartupOptions): Promise<void> {
  report.section(
    '5. Start-up',
    'Fresh processes, each figure alternated pair by pair with its floors (bare `node -e 0`; bare node listening on a unix socket) so load changes hit all. ' +
      'The daemon command runs with an empty config file. "Warm" is every start after the first (Node\'s compile cache, kept per user, holds the compiled code); ' +
      '"empty cache" is a first start, which also writes the cache before accepting. ' +
      'The SDKs of the openai-compatible model and of ACP, the client side and the search engine load when first used, not here.',
  );
  const bare: number[] = [];
  const library: number[] = [];
  const warmCache = cleanup.tempDir();
  await daemonStart(cleanup, warmCache); // unmeasured: fills the warm cache
  const floor: ColdStart[] = [];
  const warm: ColdStart[] = [];
  const empty: ColdStart[] = [];
  const daemonIndex = join(REPO, 'dist', 'daemon', 'index.js');
  for (let pair = 0; pair < options.pairs; pair++) {
    bare.push(nodeProcessMs('0'));
    library.push(nodeProcessMs(`await import(${JSON.stringify(daemonIndex)})`));
    floor.push(await socketFloor(cleanup));
    warm.push(await daemonStart(cleanup, warmCache));
    empty.push(await daemonStart(cleanup, cleanup.tempDir()));
  }
  const b = summarize(bare);
  const l = summarize(library);
  const table = new Table(`Start-up, ${options.pairs} alternating pairs (median, min–max)`, ['what', 'wall', 'min – max', 'over its floor (median)', 'CPU', 'RSS at accepting']);
  table.row('bare `node -e 0`', ms(b.p50), `${ms(b.min)} – ${ms(b.max)}`, '—', '—', '—');
  table.row('`import("dist/daemon/index.js")` (the whole library)', ms(l.p50), `${ms(l.min)} – ${ms(l.max)}`, `${ms(l.p50 - b.p50)} over bare node`, '—', '—');
  const f = summarize(floor.map((s) => s.ms));
  const rows: Row[] = [
    { what: 'floor: bare node listening on a unix socket, spawn → accepting', samples: floor },
    { what: 'daemon command, warm cache: spawn → accepting connections', samples: warm },
    { what: 'daemon command, empty cache (first start): spawn → accepting', samples: empty },
  ];
  for (const row of rows) {
    const t = summarize(row.samples.map((s) => s.ms));
    const cpu = summarize(row.samples.map((s) => s.cpuMs));
    const rss = summarize(row.samples.map((s) => s.rss));
    const over = row.samples === floor ? `${ms(t.p50 - b.p50)} over bare node` : `${ms(t.p50 - f.p50)} over the socket floor`;
    table.row(row.what, ms(t.p50), `${ms(t.min)} – ${ms(t.max)}`, over, `${ms(cpu.p50)} (${ms(cpu.min)} – ${ms(cpu.max)})`, `${bytes(rss.p50)} (${bytes(rss.min)} – ${bytes(rss.max)})`);
  }
  report.table(table);
  const w = summarize(warm.map((s) => s.ms));
  const r = summarize(warm.map((s) => s.rss));
  const floorRss = summarize(floor.map((s) => s.rss));
  report.verdict('daemon library import ≤ 0.25 s over bare node', `${ms(l.p50 - b.p50)} over`, l.p50 - b.p50 <= 250);
  report.verdict('daemon command spawn → accepting ≤ 0.25 s over bare node on a socket (warm cache)', `${ms(w.p50 - f.p50)} over`, w.p50 - f.p50 <= 250);
  report.verdict('daemon idle RSS ≤ 50 MiB', `${bytes(r.p50)} (bare node on a socket: ${bytes(floorRss.p50)})`, r.p50 <= 50 * 1024 * 1024);
  await idleMemory(report, cleanup, options.runs);
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
  const gc = await daemon.gcMemory();
  const table = new Table('Idle daemon memory (one daemon process, fixture providers)', ['when', 'RSS', 'heap used']);
  table.row('idle after start', bytes(atStart), '—');
  table.row(`idle after ${runs} trivial runs (one client, start → result → dispose), client gone`, bytes(afterRuns), '—');
  table.row('the same after a full GC', bytes(gc.rss), bytes(gc.heapUsed));
  report.table(table);
}
