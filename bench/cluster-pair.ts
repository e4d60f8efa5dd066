/**
 * `node dist/bench/cluster-pair.js DIST_A DIST_B [rounds] [seconds]`: two builds of subagentd
 * side by side through a one-member pool, under the cluster bench's load (4 connections × 8 runs
 * in flight, echo runs, the parent's cwd this checkout), alternating A and B round by round so a
 * change in the machine's load hits both. Each round is a fresh nats-server and a fresh member
 * daemon of that build (its own `dist/bench/daemons.js`, so each runs as it was built), 1 s of
 * load unmeasured, then `seconds` measured. Prints each round's runs/s and the member's and the
 * server's CPU per run, then the medians.
 *
 * DIST_x is a built tree's `dist` directory, e.g. of a `git worktree add /tmp/old <commit>` with
 * `npm ci && npm run build` (or node_modules linked in).
 */
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startNatsServer } from '../test/support/nats-server.js';
import { median } from './stats.js';

interface Round {
  readonly perSecond: number;
  readonly memberUs: number;
  readonly serverUs: number;
}

type Daemons = typeof import('./daemons.js');
type Procs = typeof import('./procs.js');
type Loops = typeof import('./loops.js');

async function round(dist: string, seconds: number): Promise<Round> {
  const load = async <T>(module: string): Promise<T> => (await import(pathToFileURL(join(dist, 'bench', module)).href)) as T;
  const { daemonProcess, clients, abortSignal } = await load<Daemons>('daemons.js');
  const { Cleanup, cpuSecondsOf } = await load<Procs>('procs.js');
  const { closedLoops } = await load<Loops>('loops.js');
  const cleanup = new Cleanup();
  const server = await startNatsServer();
  cleanup.defer('stop nats-server', () => server.stop());
  try {
    const member = await daemonProcess(cleanup, { limits: { maxConcurrentRuns: 64 }, cluster: { nats: server.url, ackWaitMs: 5000 } });
    const pool = await clients(cleanup, member.socket, 4, 'pair');
    const parent = { sessionId: 'pair', cwd: process.cwd() };
    const once = async (worker: number): Promise<void> => {
      const run = await pool[worker % 4]!.start('echo', { prompt: [{ type: 'text', text: 'echo hi' }], parent, signal: abortSignal() });
      await run.result;
      await run.dispose();
    };
    await closedLoops(32, 1000, once, async () => undefined);
    const memberCpu = cpuSecondsOf(member.pid);
    const serverCpu = cpuSecondsOf(server.pid);
    const measured = await closedLoops(32, seconds * 1000, once, async () => undefined);
    return {
      perSecond: (measured.count / measured.elapsedMs) * 1000,
      memberUs: ((cpuSecondsOf(member.pid) - memberCpu) / measured.count) * 1e6,
      serverUs: ((cpuSecondsOf(server.pid) - serverCpu) / measured.count) * 1e6,
    };
  } finally {
    await cleanup.runAll();
  }
}


async function main(): Promise<void> {
  const [a, b] = process.argv.slice(2, 4).map((dist) => resolve(dist));
  if (!a || !b) throw new Error('usage: node dist/bench/cluster-pair.js DIST_A DIST_B [rounds] [seconds]');
  const rounds = Number(process.argv[4] ?? 5);
  const seconds = Number(process.argv[5] ?? 4);
  const results = new Map<string, Round[]>([
    [a, []],
    [b, []],
  ]);
  for (let i = 0; i < rounds; i++) {
    for (const dist of [a, b]) {
      const measured = await round(dist, seconds);
      results.get(dist)!.push(measured);
      console.log(`${dist}: ${measured.perSecond.toFixed(0)} runs/s, member ${measured.memberUs.toFixed(0)} µs/run, nats-server ${measured.serverUs.toFixed(0)} µs/run (load ${loadavg()[0]!.toFixed(2)})`);
    }
  }
  for (const [dist, measured] of results) {
    console.log(
      `median ${dist}: ${median(measured.map((m) => m.perSecond)).toFixed(0)} runs/s, member ${median(measured.map((m) => m.memberUs)).toFixed(0)} µs/run, nats-server ${median(measured.map((m) => m.serverUs)).toFixed(0)} µs/run`,
    );
  }
}

await main();
