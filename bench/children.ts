/**
 * Section 2, child agents: the `spawn` provider with the scripted model running a 5-step task
 * with tool calls. Per-run overhead in-process (the provider called directly) vs over the socket
 * (the daemon process) vs the floor (the provider behind bare vscode-jsonrpc in a process of its
 * own: what crossing processes costs without the daemon; child-floor.ts), and scaling with 1 … 1000 concurrent children: throughput, the daemon's
 * peak RSS, and the memory an idle child holds.
 */
import { join } from 'node:path';
import type { RemoteSubagentService, RemoteSubagentRun } from '../client/index.js';
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { ContentBlock, RunEvent, SubagentResult } from '../protocol/index.js';
import { childFloorClient, childFloorProcess } from './child-floor.js';
import { abortSignal, clients, daemonProcess, type DaemonProcess } from './daemons.js';
import { alternating, type Bounds } from './loops.js';
import { benchHost, silentLog } from './owner.js';
import { Cleanup, RssSampler, sleep, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { bytes, ms, p50p99, rate, ratio, ratios, spreadOf, spreadText, summarize, type Summary } from './stats.js';
import { formatLoad } from './machine.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

const TASK: ContentBlock[] = [{ type: 'text', text: 'Find the needle in the notes.' }];

export interface ChildrenOptions {
  readonly perRun: Bounds;
  /** Alternating (in-process, over the socket) rounds of the per-run table: the pairs of its ratio. */
  readonly perRunPairs: number;
  readonly levels: readonly number[];
  /** For small levels, repeat the batch until at least this many runs were measured. */
  readonly minRunsPerLevel: number;
  /** Wall-time budget of the busy phase of a level. */
  readonly busyBudgetMs: (level: number) => number;
  /** Wall-time budget of the whole scaling table; levels past it are skipped. */
  readonly scalingBudgetMs: number;
  readonly connections: number;
}

function expectCompleted(result: SubagentResult, where: string): void {
  if (result.stopReason !== 'completed') {
    throw new Error(`${where}: the child ended ${result.stopReason}: ${result.diagnostic ?? '(no diagnostic)'}`);
  }
}

export async function childAgents(report: Report, cleanup: Cleanup, world: BenchWorld, options: ChildrenOptions): Promise<void> {
  report.section(
    '2. Child agents (`spawn` provider, scripted model, 5-step run)',
    'Each run: 5 model steps replayed by the scripted model, 4 tool calls on a temp workspace (list_directory, read_file ×2, ' +
      'search_text), session log written (and fsynced at creation and at turn end) in the state dir on the local disk. ' +
      'In-process = `createSpawnProvider` called directly with an in-process host; over the socket = the client → the daemon process; ' +
      'the floor = the same provider in a process of its own behind bare vscode-jsonrpc (bench/child-floor.ts: a start answered ' +
      'once the child is ready, its result in one notification; no validation, run index, admission or ownership).',
  );
  const parent = { sessionId: 'bench-parent', cwd: world.workspace };
  const limits = { maxConcurrentRuns: 4096, maxRunsPerConnection: 4096, maxQueued: 4096 };
  const config = { model: { default: `scripted:${world.fiveStep}` }, limits };

  // --- per-run overhead -----------------------------------------------------------------------
  const sessionsDir = `${cleanup.tempDir()}/sessions`;
  const provider = createSpawnProvider({
    sessionsDir,
    resolveModel: createModelResolver({ default: `scripted:${world.fiveStep}` }, {}),
    policy: { write: false, shell: false },
    log: silentLog,
  });
  cleanup.defer('dispose the in-process spawn provider', () => provider.dispose());
  const daemon = await daemonProcess(cleanup, config);
  const [service] = await clients(cleanup, daemon.socket, 1, 'children');
  const floorSocket = join(cleanup.tempDir('subagentd-bench-floor-'), 'floor.sock');
  await childFloorProcess(cleanup, floorSocket, world.fiveStep, `${cleanup.tempDir()}/sessions`);
  const floor = await childFloorClient(cleanup, floorSocket);

  /** One child: [start answered, result in], in ms from the call. */
  const timedRun = (what: string, start: () => Promise<{ result: Promise<SubagentResult>; dispose(): Promise<void> }>) => async (): Promise<number[]> => {
    const t0 = performance.now();
    const run = await start();
    const t1 = performance.now();
    const result = await run.result;
    const t2 = performance.now();
    expectCompleted(result, what);
    await run.dispose();
    return [t1 - t0, t2 - t0];
  };
  const inProcessOnce = timedRun('in-process spawn', () => provider.start({ prompt: TASK, parent, childDepth: 1, signal: abortSignal(), host: benchHost() }));
  const socketOnce = timedRun('spawn over the socket', () => service!.start('spawn', { prompt: TASK, parent, signal: abortSignal() }));
  const floorOnce = timedRun('spawn in the floor process', () => floor.start(TASK, world.workspace));
  const results = await alternating(
    [
      { name: 'in', bounds: options.perRun, once: inProcessOnce },
      { name: 'socket', bounds: options.perRun, once: socketOnce },
      { name: 'floor', bounds: options.perRun, once: floorOnce },
    ],
    options.perRunPairs,
  );
  const inR = results.get('in')!;
  const soR = results.get('socket')!;
  const flR = results.get('floor')!;
  const inReady = summarize(inR.samples[0]!);
  const inResult = summarize(inR.samples[1]!);
  const soReady = summarize(soR.samples[0]!);
  const soResult = summarize(soR.samples[1]!);
  const flReady = summarize(flR.samples[0]!);
  const flResult = summarize(flR.samples[1]!);
  const perRun = new Table('Per-run overhead, one 5-step run at a time', [
    'path',
    'start→ready p50 / p99',
    'start→result p50 / p99',
    'runs/s',
    'runs',
  ]);
  perRun.row('in-process (createSpawnProvider)', p50p99(inReady), p50p99(inResult), rate((inR.count / inR.elapsedMs) * 1000), inR.count);
  perRun.row('client → unix socket → daemon process', p50p99(soReady), p50p99(soResult), rate((soR.count / soR.elapsedMs) * 1000), soR.count);
  perRun.row('floor: bare vscode-jsonrpc → the provider in its own process', p50p99(flReady), p50p99(flResult), rate((flR.count / flR.elapsedMs) * 1000), flR.count);
  perRun.row(
    'overhead of the wire (p50)',
    `+${ms(soReady.p50 - inReady.p50)} (${ratio(soReady.p50 / inReady.p50)})`,
    `+${ms(soResult.p50 - inResult.p50)} (${ratio(soResult.p50 / inResult.p50)})`,
    '',
    '',
  );
  const resultMedians = (r: typeof inR): number[] => r.roundMedians.map((m) => m[1]!);
  const pairs = spreadOf(ratios(resultMedians(soR), resultMedians(inR)));
  const floorPairs = spreadOf(ratios(resultMedians(flR), resultMedians(inR)));
  perRun.row('start→result, socket ÷ in-process per pair: median (min – max)', '', spreadText(pairs, ratio), '', '');
  perRun.row('start→result, floor ÷ in-process per pair (crossing processes)', '', spreadText(floorPairs, ratio), '', '');
  perRun.row("start→result, socket ÷ floor per pair (the daemon's own)", '', spreadText(spreadOf(ratios(resultMedians(soR), resultMedians(flR))), ratio), '', '');
  perRun.note(
    `${options.perRun.warmup} unmeasured runs of each first, then ${options.perRunPairs} rounds in which the three take turns run by run (in-process, socket, floor, ` +
      'then floor, socket, in-process, …): a change of the machine\'s speed within a round falls on all three alike (with a block of each per round, ' +
      'the per-round ratios swung 0.74–1.54 and their median 1.06–1.27 between runs). The ratio ' +
      `rows take each round's median start→result. Load average ${formatLoad()} at the end.`,
  );
  perRun.note('runs/s includes dispose. Over the socket, readiness also covers the daemon answering and the client registering the run.');
  report.table(perRun);
  report.verdict(
    `5-step run, daemon ≤ 1.1× in-process (start→result, median of ${options.perRunPairs} alternating pairs)`,
    `${spreadText(pairs, ratio)}; the floor process alone, no daemon: ${spreadText(floorPairs, ratio)}`,
    pairs.median <= 1.1,
  );

  // --- scaling ---------------------------------------------------------------------------------
  const scaling = new Table(`Scaling: N concurrent children over ${options.connections} connections to one daemon process`, [
    'N',
    'completed / started',
    '5-step runs/s',
    'start→ready p50 / p99',
    'start→result p50 / p99 (completed)',
    'peak daemon RSS (busy)',
    'N children up in',
    'daemon RSS, N idle (after GC)',
    'RSS per idle child',
    'heap per idle child',
  ]);
  scaling.note(
    'Busy: all N runs started at once (small N repeated until ' +
      `${options.minRunsPerLevel} runs); runs/s = completed runs / wall time. A level has a time budget: runs still going ` +
      'when it ends are cancelled and not counted (completed < started). Peak RSS sampled every 20 ms from /proc; a fresh daemon per phase.',
  );
  scaling.note(
    'Idle: N children started on a fresh daemon, each has made one tool call and waits on a 10-minute model step. ' +
      'RSS and heapUsed are read right after a full GC in the daemon (before, and with N idle); per idle child = the ' +
      'difference / N, shown from N = 100 (below that it is noise). ' +
      'Bounded: if not all N got there in time, the row says how many did and divides by the runs that were ready.',
  );
  const deadline = performance.now() + options.scalingBudgetMs;
  try {
    for (const level of options.levels) {
      if (performance.now() > deadline) {
        scaling.row(level, 'skipped: the section ran out of its time budget', '', '', '', '', '', '', '', '');
        continue;
      }
      const busy = await inPhase((phase) => busyLevel({ cleanup: phase, config, parent }, level, options));
      report.progress(`children N=${level}: busy phase done (${busy.completed} runs)`);
      const idleBudget = Math.max(8_000, deadline - performance.now());
      const idle = await inPhase((phase) => idleLevel({ cleanup: phase, config, parent }, world, level, options.connections, idleBudget));
      report.progress(`children N=${level}: idle phase done (${idle.idle} of ${level} idle)`);
      const perChild = level >= 100 && idle.idle > 0;
      scaling.row(
        level,
        `${busy.completed} / ${busy.started}`,
        rate(busy.perSecond),
        p50p99(busy.ready),
        p50p99(busy.result),
        bytes(busy.peakRss),
        idle.idle === level ? ms(idle.upMs) : `${idle.idle} of ${level} in ${ms(idle.upMs)}`,
        bytes(idle.idleRss),
        perChild ? bytes((idle.idleRss - idle.baseRss) / idle.ready) : '—',
        perChild ? bytes((idle.idleHeap - idle.baseHeap) / idle.ready) : '—',
      );
    }
  } finally {
    report.table(scaling);
  }
}

/** Whether `promise` settled within `ms` (its outcome is ignored either way). */
async function settleWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return withTimeout(promise, ms, 'settle').then(
    () => true,
    (error: unknown) => !(error instanceof Error && error.message.startsWith('settle: timed out')),
  );
}

/** Runs one phase with its own cleanup, so its daemon is gone before the next phase starts. */
async function inPhase<T>(body: (phase: Cleanup) => Promise<T>): Promise<T> {
  const phase = new Cleanup();
  try {
    return await body(phase);
  } finally {
    await phase.runAll();
  }
}

async function startTimed(
  service: RemoteSubagentService,
  parent: { sessionId: string; cwd: string },
  extra: { agentOptions?: { model: string }; onEvent?: (event: RunEvent) => void } = {},
): Promise<{ run: RemoteSubagentRun; ready: number; t0: number }> {
  const t0 = performance.now();
  const run = (await service.start('spawn', { prompt: TASK, parent, signal: abortSignal(), ...extra })) as RemoteSubagentRun;
  return { run, ready: performance.now() - t0, t0 };
}

/** What one phase of a level runs in: its cleanup, the daemon's config, the parent of its runs. */
interface Phase {
  readonly cleanup: Cleanup;
  readonly config: Record<string, unknown>;
  readonly parent: { sessionId: string; cwd: string };
}

/** A fresh daemon process and `connections` clients, warmed up by five runs. */
async function warmDaemon(
  { cleanup, config, parent }: Phase,
  connections: number,
  label: string,
): Promise<{ daemon: DaemonProcess; pool: RemoteSubagentService[] }> {
  const daemon = await daemonProcess(cleanup, config);
  const pool = await clients(cleanup, daemon.socket, connections, label);
  for (let i = 0; i < 5; i++) {
    const { run } = await startTimed(pool[0]!, parent);
    expectCompleted(await run.result, 'warm-up');
    await run.dispose();
  }
  return { daemon, pool };
}

/**
 * N runs started at once, repeated until `minRunsPerLevel` runs completed; bounded by a time
 * budget, past which the runs still going are cancelled and only completed runs count.
 */
async function busyLevel(
  phase: Phase,
  level: number,
  options: ChildrenOptions,
): Promise<{ perSecond: number; started: number; completed: number; ready: Summary; result: Summary; peakRss: number }> {
  const { parent } = phase;
  const { daemon, pool } = await warmDaemon(phase, options.connections, `busy-${level}`);
  const sampler = new RssSampler(daemon.pid);
  const ready: number[] = [];
  const result: number[] = [];
  let started = 0;
  let elapsed = 0;
  const deadline = performance.now() + options.busyBudgetMs(level);
  try {
    while (result.length < Math.max(level, options.minRunsPerLevel) && performance.now() < deadline) {
      const batchStart = performance.now();
      const runs: RemoteSubagentRun[] = [];
      let stopped = false;
      const batch = Promise.all(
        Array.from({ length: level }, async (_, i) => {
          const { run, ready: r, t0 } = await startTimed(pool[i % pool.length]!, parent);
          runs.push(run);
          if (stopped) return;
          ready.push(r);
          const outcome = await run.result;
          if (stopped) return;
          expectCompleted(outcome, `busy level ${level}`);
          result.push(performance.now() - t0);
        }),
      );
      started += level;
      let timer: NodeJS.Timeout | undefined;
      const outOfTime = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - performance.now()))));
      await Promise.race([batch, outOfTime]);
      clearTimeout(timer);
      stopped = true;
      elapsed += performance.now() - batchStart;
      // Past the budget: cancel what still runs (bounded); starts still pending are left to the
      // phase's cleanup, which stops the daemon.
      await settleWithin(Promise.all(runs.map((run) => run.dispose())), 5_000);
      if (!(await settleWithin(batch, 2_000))) break;
    }
  } finally {
    sampler.stop();
  }
  return {
    perSecond: (result.length / elapsed) * 1000,
    started,
    completed: result.length,
    ready: summarize(ready),
    result: summarize(result),
    peakRss: sampler.peak,
  };
}

async function idleLevel(
  phase: Phase,
  world: BenchWorld,
  level: number,
  connections: number,
  budgetMs: number,
): Promise<{ upMs: number; ready: number; idle: number; baseRss: number; idleRss: number; baseHeap: number; idleHeap: number }> {
  const { parent } = phase;
  const { daemon, pool } = await warmDaemon(phase, connections, `idle-${level}`);
  await sleep(200);
  const base = await daemon.gcMemory();
  let toolResults = 0;
  let allIdle!: () => void;
  const idle = new Promise<void>((resolve) => (allIdle = resolve));
  // Each hold child makes one tool call before its long step: its tool/result means "now idle".
  const onEvent = (event: RunEvent): void => {
    if (event.kind === 'session' && event.event.type === 'tool/result' && ++toolResults === level) allIdle();
  };
  const t0 = performance.now();
  const runs: RemoteSubagentRun[] = [];
  const starting = Promise.all(
    Array.from({ length: level }, async (_, i) => {
      const { run } = await startTimed(pool[i % pool.length]!, parent, { agentOptions: { model: `scripted:${world.hold}` }, onEvent });
      runs.push(run);
    }),
  );
  // Bounded: past the budget, measure what did get going.
  await withTimeout(idle, budgetMs, `${level} children reaching their idle step`).catch(() => undefined);
  const upMs = performance.now() - t0;
  const reached = toolResults;
  await sleep(200);
  const idleMemory = await daemon.gcMemory();
  const ready = runs.length;
  // Bounded teardown: what is still starting, or slow to dispose, goes with the daemon.
  await settleWithin(Promise.all(runs.map((run) => run.dispose())), 5_000);
  await settleWithin(starting, 1_000);
  return {
    upMs,
    ready,
    idle: reached,
    baseRss: base.rss,
    idleRss: idleMemory.rss,
    baseHeap: base.heapUsed,
    idleHeap: idleMemory.heapUsed,
  };
}
