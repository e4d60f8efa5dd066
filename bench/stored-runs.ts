/**
 * Stored runs: what the run index costs as it grows. The bench writes 100k and 1M run
 * records straight into `runs.jsonl` (as a daemon before the archive did), lets one daemon
 * archive them (its start is reported apart: a one-off), then measures fresh daemon processes
 * started on each state dir in turn, round by round, so a change in load hits every size alike:
 * spawn → accepting, RSS at that moment and after listing, and `runs/list` limit 100 latency.
 * Retention is set past 1M so the stored runs are measured as stored, not pruned.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type RemoteSubagentService } from '../client/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { abortSignal, CLI, clients, daemonProcess } from './daemons.js';
import { formatLoad } from './machine.js';
import { Cleanup, cpuSecondsOf, rssOf, sleep, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { bytes, ms, rate, summarize } from './stats.js';
import { Table } from './table.js';
import { socketAccepts } from '../common/socket-probe.js';

export interface StoredRunsOptions {
  /** Stored-run counts to measure; 0 is the floor. */
  readonly sizes: readonly number[];
  /** Rounds: each starts one daemon per size. */
  readonly rounds: number;
  /** `runs/list` requests timed per daemon. */
  readonly lists: number;
  /** Large-output runs: steps of `runs` runs each, memory read after every step. */
  readonly largeOutput: { readonly steps: number; readonly runs: number };
}

/** The output of each large-output run (the echo provider returns its prompt). */
const LARGE_OUTPUT_BYTES = 64 * 1024;
/** Clients the large-output runs are spread over, one run at a time each. */
const LARGE_OUTPUT_CLIENTS = 4;

const RETAIN_ALL = { retention: { runs: { maxCount: 10_000_000, maxAgeDays: 36_500 } } };

/** One record as the daemon writes it: a settled-then-disposed run with a small result. */
function record(n: number, now: number): string {
  return `${JSON.stringify({
    runId: `run_${n.toString(36).padStart(8, '0')}_bench`,
    id: `bench-${n}`,
    provider: n % 4 === 0 ? 'fork' : 'spawn',
    tokenHash: (n * 2654435761).toString(16).padStart(64, '0').slice(-64),
    state: 'disposed',
    startedAt: new Date(now - 86_400_000 + n).toISOString(),
    settledAt: new Date(now - 86_400_000 + n + 500).toISOString(),
    result: { output: [{ type: 'text', text: `done ${n}` }], stopReason: 'end_turn', usage: { promptTokens: 1200, completionTokens: 80, cacheHitTokens: 1000, cacheMissTokens: 200, reasoningTokens: 0 } },
    daemonEpoch: 'bench-epoch',
    daemonPid: 4242,
  })}\n`;
}

async function writeRunLog(path: string, count: number): Promise<void> {
  const out = createWriteStream(path, { mode: 0o600 });
  const now = Date.now();
  const batch: string[] = [];
  for (let n = 0; n < count; n++) {
    batch.push(record(n, now));
    if (batch.length === 10_000 || n === count - 1) {
      if (!out.write(batch.join(''))) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
      batch.length = 0;
    }
  }
  await new Promise<void>((resolve, reject) => {
    out.once('error', reject);
    out.end(() => resolve());
  });
}



interface Started {
  readonly child: ChildProcess;
  readonly socket: string;
  readonly ms: number;
}

async function startOn(dir: string, cleanup: Cleanup): Promise<Started> {
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  const started = performance.now();
  const child = spawn(process.execPath, [CLI, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config], {
    stdio: 'ignore',
    env: { PATH: process.env['PATH'] ?? '', HOME: dir },
  });
  cleanup.defer(`stop daemon pid ${child.pid}`, () => stop(child));
  await withTimeout(
    (async () => {
      while (!(existsSync(socket) && existsSync(`${socket}.token`) && (await socketAccepts(socket)))) {
        if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}`);
        await sleep(2);
      }
    })(),
    120_000,
    'daemon start on stored runs',
  );
  return { child, socket, ms: performance.now() - started };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(killer);
}

/** Times `runs/list` limit 100 (the first page, then the page after it), after one warm-up. */
async function listLatencies(service: RemoteSubagentService, count: number): Promise<{ first: number[]; second: number[] }> {
  const first: number[] = [];
  const second: number[] = [];
  const warm = await service.ops.runsPage({ limit: 100 });
  for (let i = 0; i < count; i++) {
    let at = performance.now();
    const page = await service.ops.runsPage({ limit: 100 });
    first.push(performance.now() - at);
    if (page.runs.length !== Math.min(100, warm.runs.length)) throw new Error(`runs/list returned ${page.runs.length} runs`);
    at = performance.now();
    await service.ops.runsPage({ limit: 100, ...(page.nextCursor !== undefined && { cursor: page.nextCursor }) });
    second.push(performance.now() - at);
  }
  return { first, second };
}

export async function storedRunsBench(report: Report, cleanup: Cleanup, options: StoredRunsOptions): Promise<void> {
  report.section(
    'Stored runs',
    'Run records written straight into `runs.jsonl`; one daemon archives them (reported apart), then fresh daemon processes ' +
      'start on each size in turn, round by round. RSS is read from /proc at accepting and again after the listing.',
  );
  const dirs = new Map<number, string>();
  const archiving = new Table('First start on a whole `runs.jsonl` (a one-off: it moves the records to the archive)', ['stored runs', 'spawn → accepting']);
  for (const size of options.sizes) {
    const dir = cleanup.tempDir();
    mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(RETAIN_ALL));
    if (size > 0) await writeRunLog(join(dir, 'state', 'runs.jsonl'), size);
    const first = await startOn(dir, cleanup);
    await stop(first.child);
    archiving.row(size.toLocaleString('en'), ms(first.ms));
    dirs.set(size, dir);
  }
  report.table(archiving);

  const samples = new Map(options.sizes.map((size) => [size, { start: [] as number[], rss: [] as number[], rssListed: [] as number[], first: [] as number[], second: [] as number[] }]));
  const loads: string[] = [];
  for (let round = 0; round < options.rounds; round++) {
    loads.push(formatLoad());
    for (const size of options.sizes) {
      const s = samples.get(size)!;
      const daemon = await startOn(dirs.get(size)!, cleanup);
      s.start.push(daemon.ms);
      s.rss.push(rssOf(daemon.child.pid!));
      const service = await connect({ socket: daemon.socket, clientInfo: { name: 'bench-stored', version: '0' } });
      try {
        const { first, second } = await listLatencies(service, options.lists);
        s.first.push(...first);
        s.second.push(...second);
        s.rssListed.push(rssOf(daemon.child.pid!));
      } finally {
        await service.close();
        await stop(daemon.child);
      }
    }
  }

  const empty = summarize(samples.get(0)?.rss ?? [Number.NaN]);
  const table = new Table(`Daemon on stored runs, ${options.rounds} rounds (median, min–max); load per round ${loads.join(' | ')}`, [
    'stored runs',
    'spawn → accepting',
    'RSS at accepting',
    'RSS over empty',
    'RSS after listing',
    '`runs/list` limit 100, p50 (p90)',
    'next page, p50 (p90)',
  ]);
  const figures = new Map<number, { start: number; over: number; list: number }>();
  for (const [size, s] of samples) {
    const start = summarize(s.start);
    const rss = summarize(s.rss);
    const listed = summarize(s.rssListed);
    const first = summarize(s.first);
    const second = summarize(s.second);
    const over = Math.max(rss.p50, listed.p50) - empty.p50;
    figures.set(size, { start: start.p50, over, list: first.p50 });
    table.row(
      size.toLocaleString('en'),
      `${ms(start.p50)} (${ms(start.min)} – ${ms(start.max)})`,
      bytes(rss.p50),
      size === 0 ? '—' : bytes(over),
      bytes(listed.p50),
      `${ms(first.p50)} (${ms(first.p90)})`,
      `${ms(second.p50)} (${ms(second.p90)})`,
    );
  }
  report.table(table);
  const at100k = figures.get(100_000);
  if (at100k) {
    report.verdict('`runs/list` limit 100 ≤ 20 ms at 100k stored runs', ms(at100k.list), at100k.list <= 20);
    report.verdict('daemon start ≤ 1 s at 100k stored runs', ms(at100k.start), at100k.start <= 1000);
  }
  for (const size of options.sizes.filter((n) => n > 0)) {
    const f = figures.get(size)!;
    report.verdict(`daemon RSS ≤ +40 MiB over empty at ${size.toLocaleString('en')} stored runs`, bytes(f.over), f.over <= 40 * 1024 * 1024);
  }
  await largeOutputs(report, cleanup, options.largeOutput);
}

/**
 * Runs whose records are large: a record keeps up to 256 KiB of its run's output, and finished
 * records stay in memory until a write batch archives them (run-index.ts: past 10,000 runs or
 * 16 MiB of them). The daemon's heap after a full GC, its RSS and the log's size, step by step.
 */
async function largeOutputs(report: Report, cleanup: Cleanup, options: StoredRunsOptions['largeOutput']): Promise<void> {
  const daemon = await daemonProcess(cleanup);
  const services = await clients(cleanup, daemon.socket, LARGE_OUTPUT_CLIENTS, 'bench-large');
  const parent = { sessionId: 'bench-parent', cwd: daemon.dir };
  const prompt: ContentBlock[] = [{ type: 'text', text: `echo ${'x'.repeat(LARGE_OUTPUT_BYTES - 5)}` }];
  const log = join(daemon.dir, 'state', 'runs.jsonl');
  const table = new Table(
    `Large outputs: ${LARGE_OUTPUT_CLIENTS} clients run \`echo\` runs of ${bytes(LARGE_OUTPUT_BYTES)} output (start → result → dispose), memory after each step`,
    ['runs so far', 'runs/s (this step)', 'daemon CPU per run (this step)', 'heap used (after a full GC)', 'RSS', '`runs.jsonl`'],
  );
  const heaps: number[] = [];
  let done = 0;
  for (let step = 0; step < options.steps; step++) {
    const cpuBefore = cpuSecondsOf(daemon.pid);
    const started = performance.now();
    const doneBefore = done;
    await Promise.all(
      services.map(async (service) => {
        for (let i = 0; i < options.runs / LARGE_OUTPUT_CLIENTS; i++) {
          const run = await service.start('echo', { prompt, parent, signal: abortSignal() });
          await run.result;
          await run.dispose();
          done += 1;
        }
      }),
    );
    const runs = done - doneBefore;
    const perRun = `${Math.round(((cpuSecondsOf(daemon.pid) - cpuBefore) / runs) * 1e6).toLocaleString('en')} µs`;
    const perSecond = rate((runs / (performance.now() - started)) * 1000);
    const memory = await daemon.gcMemory();
    heaps.push(memory.heapUsed);
    table.row(done.toLocaleString('en'), perSecond, perRun, bytes(memory.heapUsed), bytes(memory.rss), bytes(existsSync(log) ? statSync(log).size : 0));
  }
  table.note(`${bytes(LARGE_OUTPUT_BYTES * done)} of output in all; the daemon archives finished records past 16 MiB of them in memory (or 10,000 runs).`);
  report.table(table);
  const growth = heaps.at(-1)! - heaps[0]!;
  report.verdict('heap flat under large outputs: growth from the first step to the last ≤ 16 MiB (the held-records bound)', bytes(growth), growth <= 16 * 1024 * 1024);
}
