/**
 * Section: long runs. One `spawn` child runs `steps` model steps through the OpenAI-compatible
 * adapter against the repo's chat-completions test server (real HTTP, the real SSE wire format,
 * in its own process: model-server-host.ts); every step but the last calls an unknown tool, so
 * the history grows by a call and its result per step. The same run goes through the daemon
 * process and through the provider called in this process, alternating in pairs (which side goes first
 * alternates too).
 * A step's time = the gap between two consecutive requests reaching the model server; the
 * daemon's share of a step = daemon step time − in-process step time (medians over a window of
 * steps, per pair). Flat means the share at step ~1000 is that at step ~10.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { ContentBlock, SubagentResult } from '../protocol/index.js';
import { abortSignal, clients, daemonProcess, REPO } from './daemons.js';
import { formatLoad } from './machine.js';
import { benchHost, silentLog } from './owner.js';
import { withTimeout, type Cleanup } from './procs.js';
import type { Report } from './report.js';
import { median, ms, spreadOf, spreadText } from './stats.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

const TASK: ContentBlock[] = [{ type: 'text', text: 'Call the tool until told to stop.' }];
const KEY_ENV = 'SUBAGENTD_BENCH_MODEL_KEY';

export interface LongRunOptions {
  readonly steps: number;
  readonly pairs: number;
}

/** The model server process: `arm(steps)` before a run, `times()` after it. */
interface ModelServer {
  readonly baseUrl: string;
  arm(steps: number): void;
  times(): Promise<number[]>;
}

async function modelServer(cleanup: Cleanup): Promise<ModelServer> {
  const child: ChildProcess = fork(join(REPO, 'dist', 'bench', 'model-server-host.js'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  cleanup.defer(`stop the model server pid ${child.pid}`, async () => {
    if (child.exitCode === null && child.signalCode === null) child.disconnect();
    await withTimeout(exited, 5_000, 'model server exit').catch(() => child.kill('SIGKILL'));
  });
  const next = <T>(): Promise<T> => new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
  const { baseUrl } = await withTimeout(next<{ baseUrl: string }>(), 10_000, 'model server start');
  return {
    baseUrl,
    arm: (steps) => child.send({ steps }),
    times: async () => {
      const answer = next<{ times: number[] }>();
      child.send('times');
      return (await withTimeout(answer, 10_000, 'model server times')).times;
    },
  };
}

function expectSteps(result: SubagentResult, where: string): void {
  if (result.stopReason !== 'completed') throw new Error(`${where}: the run ended ${result.stopReason}: ${result.diagnostic ?? ''}`);
}

/** The per-step gaps (ms): gaps[i] is the time from request i to request i + 1 (i from 0). */
const gapsOf = (times: readonly number[]): number[] => times.slice(1).map((t, i) => t - times[i]!);

export async function longRunBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: LongRunOptions): Promise<void> {
  const { steps } = options;
  report.section(
    `Long run (${steps} steps, OpenAI-compatible adapter)`,
    `One \`spawn\` child, ${steps} model steps against the repo's chat-completions test server in its own process ` +
      '(streamed SSE answers: a call of an unknown tool per step, then a text answer), session log on. A step = the gap ' +
      'between two consecutive requests reaching the server. In-process = `createSpawnProvider` called directly; ' +
      `daemon = client → unix socket → daemon process. ${options.pairs} alternating pairs, the in-process run first in the ` +
      '1st, 3rd, … and the daemon first in the 2nd, 4th, ….',
  );
  process.env[KEY_ENV] = 'bench-key';
  const server = await modelServer(cleanup);
  const model = { baseUrl: server.baseUrl, apiKeyEnv: KEY_ENV, default: 'bench-model', maxRetries: 0 };
  const parent = { sessionId: 'bench-long', cwd: world.workspace };
  const daemon = await daemonProcess(cleanup, { model, maxSteps: steps + 1 });
  const [service] = await clients(cleanup, daemon.socket, 1, 'long-run');
  const provider = createSpawnProvider({
    sessionsDir: `${cleanup.tempDir()}/sessions`,
    resolveModel: createModelResolver(model, process.env),
    policy: { write: false, shell: false },
    maxSteps: steps + 1,
    log: silentLog,
  });
  cleanup.defer('dispose the in-process spawn provider', () => provider.dispose());

  const timed = async (where: string, start: () => Promise<{ result: Promise<SubagentResult>; dispose(): Promise<void> }>): Promise<number[]> => {
    server.arm(steps);
    const run = await start();
    expectSteps(await run.result, where);
    await run.dispose();
    const times = await server.times();
    if (times.length !== steps) throw new Error(`${where}: the model saw ${times.length} requests, expected ${steps}`);
    return gapsOf(times);
  };
  const inProcess = (): Promise<number[]> =>
    timed('in-process', () => provider.start({ prompt: TASK, parent, childDepth: 1, signal: abortSignal(), host: benchHost() }));
  const overSocket = (): Promise<number[]> => timed('daemon', () => service!.start('spawn', { prompt: TASK, parent, signal: abortSignal() }));

  // Windows of steps around ~10, ~100 and ~1000 (clipped to the run): [from, to) gap indexes.
  const windows = [10, 100, 1000]
    .filter((at) => at < steps - 1)
    .concat([steps - 1])
    .map((at) => {
      const half = Math.max(5, Math.floor(at / 10));
      return { at, from: Math.max(0, at - half), to: Math.min(steps - 1, at + half) };
    });
  const windowMedian = (gaps: readonly number[], w: { from: number; to: number }): number => median(gaps.slice(w.from, w.to));

  await inProcess(); // warm-up: JIT, the HTTP agent's connection
  await overSocket();
  const inMedians: number[][] = windows.map(() => []);
  const daemonMedians: number[][] = windows.map(() => []);
  for (let pair = 0; pair < options.pairs; pair++) {
    // Which side goes first alternates (ABBA), so a drift or a rhythm of the machine that favours
    // the first or the second run of a pair favours neither side.
    let inGaps: number[];
    let daemonGaps: number[];
    if (pair % 2 === 0) {
      inGaps = await inProcess();
      daemonGaps = await overSocket();
    } else {
      daemonGaps = await overSocket();
      inGaps = await inProcess();
    }
    windows.forEach((w, i) => {
      inMedians[i]!.push(windowMedian(inGaps, w));
      daemonMedians[i]!.push(windowMedian(daemonGaps, w));
    });
  }

  const table = new Table(`Per-step time along one ${steps}-step run`, ['step (window)', 'in-process per step', 'daemon per step', 'daemon share per step']);
  const shares = windows.map((w, i) => {
    const share = spreadOf(daemonMedians[i]!.map((d, pair) => d - inMedians[i]![pair]!));
    table.row(
      `~${w.at} (${w.from + 1}–${w.to})`,
      spreadText(spreadOf(inMedians[i]!), ms),
      spreadText(spreadOf(daemonMedians[i]!), ms),
      spreadText(share, ms),
    );
    return share;
  });
  table.note(
    `Each cell: median over ${options.pairs} pairs (min – max) of the window's median step time; the share is the daemon's ` +
      `minus the in-process time, pair by pair. Load average ${formatLoad()} at the end.`,
  );
  report.table(table);
  const first = shares[0]!;
  const last = shares[shares.length - 1]!;
  report.verdict(
    `per-step daemon share ≤ 1 ms at every window and flat to step ${windows[windows.length - 1]!.at} (median of ${options.pairs} pairs)`,
    shares.map((share, i) => `${ms(share.median)} at ~${windows[i]!.at}`).join(', '),
    // Every window, not only the last: the goal is ≤ 1 ms a step all along the run.
    shares.every((share) => share.median <= 1) && last.median <= Math.max(first.median, 0) + 0.5,
  );
}
