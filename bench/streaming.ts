/**
 * Section: event streaming. One client streams a `spawn` child's events (the scripted model's
 * `stream` script: 50 steps of short deltas, an assistant message, usage and a tool call each,
 * so the session log writes as much as the stream carries) from the daemon process, run after
 * run, against the same provider called in this process with a host that only counts. The two
 * alternate in pairs; the session log is on in both (a temp state dir on the local disk). The
 * client speaks this build's protocol, so from 1.3 on it gets a turn's events as one `run/events`.
 * CPU per event is reported for both processes: it moves far less with the machine's load than
 * the rate does.
 */
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { abortSignal, clients, daemonProcess } from './daemons.js';
import { closedLoops } from './loops.js';
import { formatLoad } from './machine.js';
import { benchHost, silentLog } from './owner.js';
import { cpuSecondsOf, ownCpuSeconds, type Cleanup } from './procs.js';
import type { Report } from './report.js';
import { rate, ratio, ratios, spreadOf, spreadText } from './stats.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

const TASK: ContentBlock[] = [{ type: 'text', text: 'Stream as much as you can.' }];

export interface StreamingOptions {
  readonly pairs: number;
  readonly budgetMs: number;
}

export async function streamingBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: StreamingOptions): Promise<void> {
  report.section(
    'Event streaming (session log on)',
    'Events = run events one client receives from one streamed `spawn` child at a time (runs back to back; a 1.3 client gets ' +
      'each event-loop turn\'s events in one `run/events` notification), ' +
      'each step of the scripted child giving 3 text deltas, its assistant message, usage, a tool call and its result; ' +
      'the session events among them are also written to the child\'s session log. In-process = the provider called ' +
      `directly with a host that counts what it emits. ${options.pairs} alternating (in-process, daemon) pairs.`,
  );
  const parent = { sessionId: 'bench-stream', cwd: world.workspace };
  const daemon = await daemonProcess(cleanup, { model: { default: `scripted:${world.stream}` } });
  const [service] = await clients(cleanup, daemon.socket, 1, 'stream');
  const provider = createSpawnProvider({
    sessionsDir: `${cleanup.tempDir()}/sessions`,
    resolveModel: createModelResolver({ default: `scripted:${world.stream}` }, {}),
    policy: { write: false, shell: false },
    log: silentLog,
  });
  cleanup.defer('dispose the in-process spawn provider', () => provider.dispose());

  let events = 0;
  const overSocket = async (): Promise<void> => {
    const run = await service!.start('spawn', { prompt: TASK, parent, signal: abortSignal(), onEvent: () => void events++ });
    await run.result;
    await run.dispose();
  };
  const inProcess = async (): Promise<void> => {
    const host = { ...benchHost(), emit: () => void events++ };
    const run = await provider.start({ prompt: TASK, parent, childDepth: 1, signal: abortSignal(), host });
    await run.result;
    await run.dispose();
  };
  const measure = async (once: () => Promise<void>, pid?: number): Promise<{ perSecond: number; cpuPerEvent: number; ownCpuPerEvent: number }> => {
    await once(); // warm-up
    events = 0;
    const cpuBefore = pid === undefined ? Number.NaN : cpuSecondsOf(pid);
    const ownBefore = ownCpuSeconds();
    const result = await closedLoops(1, options.budgetMs, once);
    const cpu = pid === undefined ? Number.NaN : cpuSecondsOf(pid) - cpuBefore;
    return { perSecond: (events / result.elapsedMs) * 1000, cpuPerEvent: cpu / events, ownCpuPerEvent: (ownCpuSeconds() - ownBefore) / events };
  };
  const inRates: number[] = [];
  const inCpu: number[] = [];
  const socketRates: number[] = [];
  const cpuPerEvent: number[] = [];
  const clientCpu: number[] = [];
  for (let pair = 0; pair < options.pairs; pair++) {
    const local = await measure(inProcess);
    inRates.push(local.perSecond);
    inCpu.push(local.ownCpuPerEvent);
    const socket = await measure(overSocket, daemon.pid);
    socketRates.push(socket.perSecond);
    cpuPerEvent.push(socket.cpuPerEvent);
    clientCpu.push(socket.ownCpuPerEvent);
  }
  const µs = (values: number[]): string => `${(spreadOf(values).median * 1e6).toFixed(1)} µs`;
  const table = new Table('Events streamed to one client, one child at a time', [
    'path',
    'events/s, median (min – max)',
    'daemon CPU per event',
    'bench process CPU per event',
    '÷ in-process, per pair',
  ]);
  const daemonRate = spreadOf(socketRates);
  table.row('in-process (createSpawnProvider, counting host)', spreadText(spreadOf(inRates), (v) => rate(v)), '—', µs(inCpu), '1.00×');
  table.row(
    'client → unix socket → daemon process',
    spreadText(daemonRate, (v) => rate(v)),
    µs(cpuPerEvent),
    µs(clientCpu),
    spreadText(spreadOf(ratios(socketRates, inRates)), ratio),
  );
  table.note('CPU per event is per median measurement; the bench process is the in-process child itself on the first row, the client on the second.');
  table.note(`Load average ${formatLoad()} at the end.`);
  report.table(table);
  report.verdict('≥ 50k events/s streamed to one client, session log on', `${rate(daemonRate.median)} (median of ${options.pairs})`, daemonRate.median >= 50_000);
}
