/**
 * Section 1, wire overhead: the trivial `echo` provider through the in-process service, through
 * the client over a unix socket (daemon library in this process, and the real daemon process),
 * over stdio to a private daemon, against the floor (a bare vscode-jsonrpc echo).
 */
import { join } from 'node:path';
import type { RemoteSubagentService } from '../client/index.js';
import type { ContentBlock, StartParams } from '../protocol/index.js';
import { abortSignal, client, clients, daemonProcess, inProcessDaemon, stdioClient } from './daemons.js';
import { echoClient, echoServerProcess, listenEcho, type EchoClient } from './echo-floor.js';
import { closedLoops, interleaved, type Bounds } from './loops.js';
import { benchOwner } from './owner.js';
import { cpuSecondsOf, ownCpuSeconds, type Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, p50p99, pct, rate, ratio, summarize, type Summary } from './stats.js';
import { Table } from './table.js';

const PROMPT: ContentBlock[] = [{ type: 'text', text: 'echo hello from the bench' }];

export interface WireOptions {
  readonly rounds: number;
  readonly latency: Bounds;
  readonly stdioLatency: Bounds;
  readonly throughputMs: number;
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

function floorOnce(echo: EchoClient, payload: unknown, withNote = false): Once {
  return async () => {
    const t0 = performance.now();
    await (withNote ? echo.echoAfterNote(payload) : echo.echo(payload));
    return [performance.now() - t0];
  };
}

export async function wireOverhead(report: Report, cleanup: Cleanup, options: WireOptions): Promise<void> {
  report.section(
    '1. Wire overhead (trivial `echo` provider)',
    'start→ready: from calling start until the run handle is ready (the `subagent/start` answer). start→result: until its ' +
      'result is in (the `subagent/end` notification). Sequential runs/s include `run/dispose`: per run the wire carries two ' +
      'requests (`subagent/start`, `run/dispose`) and two notifications (`subagent/start`, `subagent/end`). The floor is a bare vscode-jsonrpc request echoing a start-sized payload' +
      ' on the same kind of unix socket. Configurations are interleaved in rounds and their samples pooled.',
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

  const localClient = await client(cleanup, local.socket, 'bench-local');
  const procClient = await client(cleanup, proc.socket, 'bench-proc');
  const stdio = await stdioClient(cleanup);
  const floorLocalPath = join(local.dir, 'run', 'echo.sock');
  const floorLocal = await listenEcho(floorLocalPath);
  cleanup.defer('close the in-process echo server', () => floorLocal.close());
  const floorProcPath = join(proc.dir, 'run', 'echo.sock');
  const echoPid = await echoServerProcess(cleanup, floorProcPath);
  const echoLocal = await echoClient(cleanup, floorLocalPath);
  const echoProc = await echoClient(cleanup, floorProcPath);

  const configs = [
    { name: 'a', bounds: options.latency, once: inProcessOnce },
    { name: 'b1', bounds: options.latency, once: clientOnce(localClient, parent) },
    { name: 'b2', bounds: options.latency, once: clientOnce(procClient, parent) },
    { name: 'c', bounds: options.stdioLatency, once: clientOnce(stdio, parent) },
    { name: 'd1', bounds: options.latency, once: floorOnce(echoLocal, params) },
    { name: 'd2', bounds: options.latency, once: floorOnce(echoProc, params) },
    { name: 'e1', bounds: options.latency, once: floorOnce(echoLocal, params, true) },
    { name: 'e2', bounds: options.latency, once: floorOnce(echoProc, params, true) },
  ];
  const results = await interleaved(configs, options.rounds);
  const get = (name: string): { ready: Summary; result: Summary | undefined; perSecond: number; n: number } => {
    const r = results.get(name)!;
    return {
      ready: summarize(r.samples[0] ?? []),
      result: r.samples[1] ? summarize(r.samples[1]) : undefined,
      perSecond: (r.count / r.elapsedMs) * 1000,
      n: r.count,
    };
  };
  const floorLocalS = get('d1');
  const floorProcS = get('d2');
  const table = new Table('Sequential latency, one run in flight', [
    'path',
    'start→ready p50 / p99',
    'ready p50 ÷ floor p50',
    'start→result p50 / p99',
    'sequential runs/s',
    'runs',
  ]);
  const rows: Array<[string, string, Summary | undefined]> = [
    ['a', '(a) in-process SubagentService, no wire', undefined],
    ['b1', '(b1) client → unix socket → daemon library in this process', floorLocalS.ready],
    ['b2', '(b2) client → unix socket → daemon process', floorProcS.ready],
    ['c', '(c) client → stdio → private daemon process', floorProcS.ready],
  ];
  for (const [key, label, floor] of rows) {
    const s = get(key);
    table.row(label, p50p99(s.ready), floor ? ratio(s.ready.p50 / floor.p50) : '—', s.result ? p50p99(s.result) : '—', rate(s.perSecond), s.n);
  }
  table.row('(d1) floor: vscode-jsonrpc echo, server in this process', p50p99(floorLocalS.ready), '1.00×', '—', rate(floorLocalS.perSecond), floorLocalS.n);
  table.row('(d2) floor: vscode-jsonrpc echo, server process', p50p99(floorProcS.ready), '1.00×', '—', rate(floorProcS.perSecond), floorProcS.n);
  const e1 = get('e1');
  const e2 = get('e2');
  table.row('(e1) echo that sends a notification first, server in this process', p50p99(e1.ready), ratio(e1.ready.p50 / floorLocalS.ready.p50), '—', rate(e1.perSecond), e1.n);
  table.row('(e2) echo that sends a notification first, server process', p50p99(e2.ready), ratio(e2.ready.p50 / floorProcS.ready.p50), '—', rate(e2.perSecond), e2.n);
  table.note('(b1) is compared with (d1), (b2) and (c) with (d2): client and server in one process vs in two.');
  table.note(
    '(e) is the message pattern of a start with no work behind it: the daemon sends `subagent/start` before answering. ' +
      `Against it, start→ready is ${ratio(get('b1').ready.p50 / e1.ready.p50)} (b1 ÷ e1) and ${ratio(get('b2').ready.p50 / e2.ready.p50)} (b2 ÷ e2).`,
  );
  table.note('For the floor rows "runs/s" is echo round trips/s.');
  report.table(table);

  const b1 = get('b1').ready.p50 / floorLocalS.ready.p50;
  const b2 = get('b2').ready.p50 / floorProcS.ready.p50;
  report.verdict('start→ready within 1.5× the floor, daemon process (b2 vs d2)', `${ratio(b2)} (${ms(get('b2').ready.p50)} vs ${ms(floorProcS.ready.p50)})`, b2 <= 1.5);
  report.verdict('start→ready within 1.5× the floor, daemon in this process (b1 vs d1)', `${ratio(b1)} (${ms(get('b1').ready.p50)} vs ${ms(floorLocalS.ready.p50)})`, b1 <= 1.5);

  // --- throughput across several connections ------------------------------------------------
  const depth = options.pipelineDepth;
  const load = new Table(`Trivial runs/s across several connections, ${depth} runs in flight per connection`, [
    'target',
    'connections',
    'runs/s',
    'vs floor',
    'server CPU',
    'bench (client) CPU',
  ]);
  const maxConnections = Math.max(...options.connections);
  const procPool = await clients(cleanup, proc.socket, maxConnections, 'load-proc');
  const localPool = await clients(cleanup, local.socket, maxConnections, 'load-local');
  const echoPool: EchoClient[] = [];
  for (let i = 0; i < maxConnections; i++) echoPool.push(await echoClient(cleanup, floorProcPath));

  const runLoad = async (
    pool: RemoteSubagentService[],
    connections: number,
    serverPid: number | undefined,
  ): Promise<{ perSecond: number; serverCpu: number; clientCpu: number }> => {
    const disposals: Promise<void>[] = [];
    const once = async (worker: number): Promise<void> => {
      const service = pool[worker % connections]!;
      const run = await service.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
      await run.result;
      disposals.push(run.dispose());
    };
    // Warm-up at the same shape, then measure.
    await closedLoops(connections * depth, 300, once, () => Promise.all(disposals.splice(0)));
    return measuredLoad(serverPid, () => closedLoops(connections * depth, options.throughputMs, once, () => Promise.all(disposals.splice(0))));
  };
  const runEchoLoad = (connections: number): Promise<{ perSecond: number; serverCpu: number; clientCpu: number }> => {
    const once = async (worker: number): Promise<void> => {
      await echoPool[worker % connections]!.echo(params);
    };
    return measuredLoad(echoPid, () => closedLoops(connections * depth, Math.min(options.throughputMs, 1500), once));
  };

  const summaryRows: Array<{ connections: number; perSecond: number }> = [];
  for (const connections of options.connections) {
    const floor = await runEchoLoad(connections);
    const viaProc = await runLoad(procPool, connections, proc.pid);
    const viaLocal = await runLoad(localPool, connections, undefined);
    load.row('daemon process (b2)', connections, rate(viaProc.perSecond), ratio(viaProc.perSecond / floor.perSecond), pct(viaProc.serverCpu), pct(viaProc.clientCpu));
    load.row('daemon library in this process (b1)', connections, rate(viaLocal.perSecond), ratio(viaLocal.perSecond / floor.perSecond), '(shared)', pct(viaLocal.clientCpu));
    load.row('floor: echo server process (d2)', connections, rate(floor.perSecond), '1.00×', pct(floor.serverCpu), pct(floor.clientCpu));
    summaryRows.push({ connections, perSecond: viaProc.perSecond });
  }
  load.note('A run here is start → result → dispose (dispose is sent without blocking the next start, and awaited before the clock stops).');
  load.note('CPU is CPU-seconds per wall-second of that process (100 % = one core busy); all clients run in the bench process.');
  report.table(load);
  const best = summaryRows.reduce((a, b) => (b.perSecond > a.perSecond ? b : a));
  report.verdict(
    '≥ 3,000 trivial runs/s across several connections (daemon process)',
    summaryRows.map((r) => `${rate(r.perSecond)} with ${r.connections} connections`).join(', '),
    best.perSecond >= 3000,
  );
}

async function measuredLoad(
  serverPid: number | undefined,
  body: () => Promise<{ count: number; elapsedMs: number }>,
): Promise<{ perSecond: number; serverCpu: number; clientCpu: number }> {
  const serverBefore = serverPid === undefined ? Number.NaN : cpuSecondsOf(serverPid);
  const clientBefore = ownCpuSeconds();
  const result = await body();
  const seconds = result.elapsedMs / 1000;
  return {
    perSecond: result.count / seconds,
    serverCpu: serverPid === undefined ? Number.NaN : (cpuSecondsOf(serverPid) - serverBefore) / seconds,
    clientCpu: (ownCpuSeconds() - clientBefore) / seconds,
  };
}
