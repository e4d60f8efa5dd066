/**
 * Section 1, wire overhead: the trivial `echo` provider through the in-process service and
 * through the client to the real daemon process (unix socket, and stdio to a private daemon),
 * against three floors, each its own process as the daemon is: a vscode-jsonrpc echo with the
 * library's own writers (the floor the targets use), the same echo with the shared frame writer
 * on both ends (what vscode-jsonrpc's writer costs), and a raw echo with no library (what its
 * reader and dispatch queue cost). Latency configurations alternate in rounds; each round's
 * medians make one pair, and ratios are reported as the median and range over the pairs.
 */
import { join } from 'node:path';
import type { RemoteSubagentService } from '../client/index.js';
import type { ContentBlock, StartParams } from '../protocol/index.js';
import { DEFAULT_POLL_SPIN_MICROS } from '../daemon/daemon.js';
import { abortSignal, clients, daemonProcess, inProcessDaemon, stdioClient } from './daemons.js';
import { echoClient, echoServerProcess, type EchoClient } from './echo-floor.js';
import { closedLoops, interleaved, sequential, type Bounds } from './loops.js';
import { benchOwner } from './owner.js';
import { cpuSecondsOf, ownCpuSeconds, type Cleanup } from './procs.js';
import { rawEchoClient, type RawEchoClient } from './raw-echo.js';
import type { Report } from './report.js';
import { formatLoad } from './machine.js';
import { ms, p50p99, pct, rate, ratio, ratios, spreadOf, spreadText, summarize, type Spread } from './stats.js';
import { Table } from './table.js';

const PROMPT: ContentBlock[] = [{ type: 'text', text: 'echo hello from the bench' }];

export interface WireOptions {
  /** Alternating rounds of the latency configurations (the pairs ratios are taken over). */
  readonly rounds: number;
  readonly latency: Bounds;
  readonly throughputMs: number;
  /** Alternating (echo, daemon) pairs per connection count. */
  readonly throughputPairs: number;
  readonly connections: readonly number[];
  readonly pipelineDepth: number;
}

type Once = () => Promise<number[]>;

function clientOnce(service: RemoteSubagentService, parent: StartParams['parent']): Once {
  return async () => {
    const t0 = performance.now();
    const run = await service.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
    const t1 = performance.now();
    await run.result;
    const t2 = performance.now();
    await run.dispose();
    return [t1 - t0, t2 - t0];
  };
}

function floorOnce(echo: EchoClient | RawEchoClient, payload: unknown, withNote = false): Once {
  return async () => {
    const t0 = performance.now();
    await (withNote ? (echo as EchoClient).echoAfterNote(payload) : echo.echo(payload));
    return [performance.now() - t0];
  };
}

export async function wireOverhead(report: Report, cleanup: Cleanup, options: WireOptions): Promise<void> {
  report.section(
    '1. Wire overhead (trivial `echo` provider)',
    'start→ready: from calling start until the run handle is ready (the `subagent/start` answer). start→result: until its ' +
      'result is in (the `subagent/end` notification). Sequential runs/s include `run/dispose`: per run the wire carries two ' +
      'requests (`subagent/start`, `run/dispose`) and one notification (`subagent/end`, in the write after the start answer, which a client with ' +
      'no other request open gets at once; from protocol 1.3 the answer stands for `subagent/start`). The floors answer a ' +
      'start-sized payload on the same kind of unix socket, each served by its own process as the daemon is: (d) vscode-jsonrpc ' +
      'with its own writers on both ends, (f) vscode-jsonrpc with the frame writer the client and daemon use, (r) no library. ' +
      `Each configuration first runs ${options.latency.warmup} times unmeasured, past the point where V8 optimizes (TurboFan) the code that runs once a run. ` +
      `Configurations alternate in ${options.rounds} rounds, every other one in reverse order; a round's medians make one pair, and "÷ floor" is the median ` +
      '(min – max) of the per-round ratios.',
  );
  const local = await inProcessDaemon(cleanup);
  const proc = await daemonProcess(cleanup);
  const parent = { sessionId: 'bench-parent', cwd: local.dir };
  const params: StartParams = { provider: 'echo', prompt: PROMPT, parent };

  const owner = benchOwner('bench-owner');
  const service = local.daemon.service;
  const inProcessOnce: Once = async () => {
    const t0 = performance.now();
    const started = await service.start(params, owner, abortSignal());
    const t1 = performance.now();
    await service.wait(started.runId, owner);
    const t2 = performance.now();
    await service.dispose(started.runId, owner);
    return [t1 - t0, t2 - t0];
  };

  const [procClient] = await clients(cleanup, proc.socket, 1, 'bench-proc');
  // Row n: the same daemon with its poll spin off (daemon/connection/poll-spin.ts).
  const noSpin = await daemonProcess(cleanup, { pollSpinMicros: 0 });
  const [noSpinClient] = await clients(cleanup, noSpin.socket, 1, 'bench-no-spin');
  // Row s: the same client and daemon, the start answered before the service (daemon-host.ts).
  const answerFirst = await daemonProcess(cleanup, {}, [], { SUBAGENTD_BENCH_START: 'answer-first' });
  const [answerFirstClient] = await clients(cleanup, answerFirst.socket, 1, 'bench-answer-first');
  const firstRun = await answerFirstClient!.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
  await firstRun.result;
  // Its later starts have no child behind them: never awaited, never disposed (the client drops them at close).
  const answerFirstOnce: Once = async () => {
    const t0 = performance.now();
    await answerFirstClient!.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
    return [performance.now() - t0];
  };
  const stdio = await stdioClient(cleanup);
  const floorPath = (kind: string): string => join(proc.dir, 'run', `echo-${kind}.sock`);
  const echoPid = await echoServerProcess(cleanup, floorPath('library'), 'library');
  await echoServerProcess(cleanup, floorPath('frames'), 'frames');
  await echoServerProcess(cleanup, floorPath('raw'), 'raw');
  const echoLibrary = await echoClient(cleanup, floorPath('library'), 'library');
  const echoFrames = await echoClient(cleanup, floorPath('frames'), 'frames');
  const echoRaw = await rawEchoClient(floorPath('raw'));
  cleanup.defer('close the raw echo client', () => echoRaw.close());

  const configs = [
    { name: 'a', bounds: options.latency, once: inProcessOnce },
    { name: 'b', bounds: options.latency, once: clientOnce(procClient!, parent) },
    { name: 'n', bounds: options.latency, once: clientOnce(noSpinClient!, parent) },
    { name: 'c', bounds: options.latency, once: clientOnce(stdio, parent) },
    { name: 's', bounds: options.latency, once: answerFirstOnce },
    { name: 'd', bounds: options.latency, once: floorOnce(echoLibrary, params) },
    { name: 'e', bounds: options.latency, once: floorOnce(echoLibrary, params, true) },
    { name: 'f', bounds: options.latency, once: floorOnce(echoFrames, params) },
    { name: 'r', bounds: options.latency, once: floorOnce(echoRaw, params) },
  ];
  const loadBefore = formatLoad();
  const results = await interleaved(configs, options.rounds);
  // What the poll spin costs: each daemon's CPU over a stretch of sequential runs of its own, warm by now.
  const cpuPerRun = async (pid: number, once: Once): Promise<string> => {
    const before = cpuSecondsOf(pid);
    const run = await sequential({ warmup: 0, max: options.latency.max / 2, budgetMs: options.latency.budgetMs / 2 }, once);
    const cpu = ((cpuSecondsOf(pid) - before) * 1e6) / run.count;
    return `${cpu.toFixed(0)} µs in ${((run.elapsedMs * 1000) / run.count).toFixed(0)} µs of wall time`;
  };
  const spinCost = { b: await cpuPerRun(proc.pid, clientOnce(procClient!, parent)), n: await cpuPerRun(noSpin.pid, clientOnce(noSpinClient!, parent)) };
  const get = (name: string) => {
    const r = results.get(name)!;
    return {
      ready: summarize(r.samples[0] ?? []),
      result: r.samples[1] ? summarize(r.samples[1]) : undefined,
      rounds: r.roundMedians.map((m) => m[0]!),
      perSecond: (r.count / r.elapsedMs) * 1000,
      n: r.count,
    };
  };
  const floor = get('d');
  const vsFloor = (name: string): Spread => spreadOf(ratios(get(name).rounds, floor.rounds));
  const table = new Table('Sequential latency, one run in flight', [
    'path',
    'start→ready p50 / p99',
    'ready, round medians: median (min – max)',
    'ready ÷ floor (d)',
    'start→result p50 / p99',
    'sequential runs/s',
    'runs',
  ]);
  const rows: Array<[string, string]> = [
    ['a', '(a) in-process SubagentService, no wire'],
    ['b', '(b) client → unix socket → daemon process'],
    ['n', '(n) (b) with the daemon\'s poll spin off (`pollSpinMicros: 0`)'],
    ['c', '(c) client → stdio → private daemon process'],
    ['s', '(s) (b) with the start answered before the service (the bench host answers a copy of the first)'],
    ['d', '(d) floor: vscode-jsonrpc echo process, its own writers'],
    ['e', '(e) floor (d) sending a notification before it answers'],
    ['f', '(f) floor: vscode-jsonrpc echo process, frame writer both ends'],
    ['r', '(r) floor: raw echo process, no library'],
  ];
  for (const [key, label] of rows) {
    const s = get(key);
    table.row(
      label,
      p50p99(s.ready),
      spreadText(spreadOf(s.rounds), ms),
      key === 'a' ? '—' : spreadText(vsFloor(key), ratio),
      s.result ? p50p99(s.result) : '—',
      rate(s.perSecond),
      s.n,
    );
  }
  table.note(`Load average ${loadBefore} before these rounds, ${formatLoad()} after.`);
  table.note('(e) is the message pattern of a start to a client of protocol 1.2 or older (the daemon sends `subagent/start` before answering); a 1.3 client, as here, gets (d)\'s pattern then `subagent/end` in the next write.');
  table.note(
    'vscode-jsonrpc on both ends, by the medians: its writer costs (d) − (f) = ' +
      `${ms(spreadOf(floor.rounds).median - spreadOf(get('f').rounds).median)} a round trip; its reader, queue and promises (f) − (r) = ` +
      `${ms(spreadOf(get('f').rounds).median - spreadOf(get('r').rounds).median)}.`,
  );
  table.note('For the floor rows "runs/s" is echo round trips/s.');
  table.note(
    `(b) and (c) run the daemon's default: after it hears from a client or answers it, its event loop polls on for up to ${DEFAULT_POLL_SPIN_MICROS} µs instead of sleeping ` +
      "(daemon/connection/poll-spin.ts), so a client's next message finds a CPU that has not idled; (n) is the same daemon with that off. " +
      `What it costs, as daemon CPU per sequential run (all its threads, over ${options.latency.max / 2} more runs of each after these rounds): ` +
      `(b) ${spinCost.b}, (n) ${spinCost.n}. The floors do not spin: (n) ÷ (d) is the daemon's code against the floor's, ` +
      '(b) ÷ (d) what a client of the default daemon waits.',
  );
  table.note(
    "(s) keeps the client, the socket and the daemon's reading, framing and writing, and takes out the service (validation, " +
      'admission, the provider, the run record and its write-ahead): (s) ÷ (d) is the client and the wire against the floor, and ' +
      `(b) ÷ (s) per round, ${spreadText(spreadOf(ratios(get('b').rounds, get('s').rounds)), ratio)} (by the medians ` +
      `${ms(spreadOf(get('b').rounds).median - spreadOf(get('s').rounds).median)} a start), is what the service's own work adds.`,
  );
  table.note(
    'What (b) and (c) do not pay of that: both ends read frames with the shared splitter (common/frame-splitter.ts), not the ' +
      "library's reader; the client takes answers as they are read (vscode-jsonrpc's maxParallelism, kept in order by " +
      "client/inbound-order.ts, which has a run's end and events handled by the channel itself at the turn's check phase); a run's start and dispose go around the library's request queue and promise chain on both " +
      "ends (client/direct-requests.ts, daemon/connection/direct-lane.ts). Every other message goes through vscode-jsonrpc.",
  );
  report.table(table);

  const b = vsFloor('b');
  report.verdict(
    'start→ready ≤ 1.2× the vscode-jsonrpc echo floor in its own process (b ÷ d, median of round pairs)',
    `${spreadText(b, ratio)} (${ms(spreadOf(get('b').rounds).median)} vs ${ms(spreadOf(floor.rounds).median)})`,
    b.median <= 1.2,
  );

  // --- throughput across several connections ------------------------------------------------
  const depth = options.pipelineDepth;
  const load = new Table(`Trivial runs/s across several connections, ${depth} runs in flight per connection`, [
    'target',
    'connections',
    'runs/s, median (min – max)',
    '÷ echo (d), per pair',
    'server CPU',
    'server CPU per run',
    'bench (client) CPU',
    'client CPU per run',
  ]);
  const maxConnections = Math.max(...options.connections);
  const procPool = await clients(cleanup, proc.socket, maxConnections, 'load-proc');
  const echoPool: EchoClient[] = [];
  for (let i = 0; i < maxConnections; i++) echoPool.push(await echoClient(cleanup, floorPath('library'), 'library'));

  const runLoad = async (connections: number): Promise<LoadFigures> => {
    const disposals: Promise<void>[] = [];
    const once = async (worker: number): Promise<void> => {
      const service = procPool[worker % connections]!;
      const run = await service.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
      await run.result;
      disposals.push(run.dispose());
    };
    await closedLoops(connections * depth, 200, once, () => Promise.all(disposals.splice(0)));
    return measuredLoad(proc.pid, () => closedLoops(connections * depth, options.throughputMs, once, () => Promise.all(disposals.splice(0))));
  };
  const runEchoLoad = async (connections: number): Promise<LoadFigures> => {
    const once = async (worker: number): Promise<void> => {
      await echoPool[worker % connections]!.echo(params);
    };
    await closedLoops(connections * depth, 200, once);
    return measuredLoad(echoPid, () => closedLoops(connections * depth, options.throughputMs, once));
  };

  const fractions: Array<{ connections: number; fraction: Spread; perRunCpu: number }> = [];
  for (const connections of options.connections) {
    const echo: LoadFigures[] = [];
    const daemon: LoadFigures[] = [];
    for (let pair = 0; pair < options.throughputPairs; pair++) {
      // Which goes first alternates (ABBA), as in every paired figure of the bench.
      if (pair % 2 === 0) echo.push(await runEchoLoad(connections));
      daemon.push(await runLoad(connections));
      if (pair % 2 === 1) echo.push(await runEchoLoad(connections));
    }
    const fraction = spreadOf(ratios(daemon.map((d) => d.perSecond), echo.map((e) => e.perSecond)));
    const row = (label: string, figures: LoadFigures[], vs: string): void => {
      const cpu = spreadOf(figures.map((f) => f.serverCpu)).median;
      const perSecond = spreadOf(figures.map((f) => f.perSecond));
      const clientCpu = spreadOf(figures.map((f) => f.clientCpu)).median;
      const perRun = (share: number): string => `${((share / perSecond.median) * 1e6).toFixed(0)} µs`;
      load.row(label, connections, spreadText(perSecond, (v) => rate(v)), vs, pct(cpu), perRun(cpu), pct(clientCpu), perRun(clientCpu));
    };
    row('daemon process (b)', daemon, spreadText(fraction, ratio));
    row('floor: vscode-jsonrpc echo process (d)', echo, '1.00×');
    const cpu = spreadOf(daemon.map((f) => f.serverCpu / f.perSecond)).median;
    fractions.push({ connections, fraction, perRunCpu: cpu });
  }
  load.note(`${options.throughputPairs} alternating pairs per row (echo first, then the daemon first, …); "÷ echo" is the median (min – max) of the per-pair ratios. Load average ${formatLoad()} at the end.`);
  load.note('A run here is start → result → dispose (dispose is sent without blocking the next start, and awaited before the clock stops); an echo is one request.');
  load.note('CPU is CPU-seconds per wall-second of that process (100 % = one core busy); all clients run in the bench process.');
  report.table(load);
  const best = fractions.reduce((x, y) => (y.fraction.median > x.fraction.median ? y : x));
  report.verdict(
    `trivial runs/s ≥ 0.4 of the echo's requests/s at the same concurrency (${depth} in flight per connection)`,
    fractions.map((f) => `${ratio(f.fraction.median)} with ${f.connections} connections`).join(', '),
    best.fraction.median >= 0.4,
  );
  report.verdict(
    'daemon CPU per trivial run ≤ 120 µs',
    fractions.map((f) => `${(f.perRunCpu * 1e6).toFixed(0)} µs with ${f.connections} connections`).join(', '),
    Math.min(...fractions.map((f) => f.perRunCpu)) <= 120e-6,
  );
}

interface LoadFigures {
  readonly perSecond: number;
  readonly serverCpu: number;
  readonly clientCpu: number;
}

async function measuredLoad(serverPid: number, body: () => Promise<{ count: number; elapsedMs: number }>): Promise<LoadFigures> {
  const serverBefore = cpuSecondsOf(serverPid);
  const clientBefore = ownCpuSeconds();
  const result = await body();
  const seconds = result.elapsedMs / 1000;
  return {
    perSecond: result.count / seconds,
    serverCpu: (cpuSecondsOf(serverPid) - serverBefore) / seconds,
    clientCpu: (ownCpuSeconds() - clientBefore) / seconds,
  };
}
