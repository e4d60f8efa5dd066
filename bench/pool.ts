/**
 * Section 4, the shared pool: throughput and start latency with 1, 10 and 50 clients; fairness of
 * the admission queue when one client floods a small pool; and the daemon's memory while a client
 * stops reading the run events its runs stream.
 */
import type { RemoteSubagentService, RemoteSubagentRun } from '../client/index.js';
import type { ContentBlock, StartParams } from '../protocol/index.js';
import { abortSignal, client, clients, daemonProcess } from './daemons.js';
import { closedLoops } from './loops.js';
import { cpuSecondsOf, RssSampler, rssOf, sleep, type Cleanup } from './procs.js';
import { RawClient } from './raw-client.js';
import type { Report } from './report.js';
import { bytes, ms, p50p99, pct, rate, summarize } from './stats.js';
import { Table } from './table.js';
import { CHATTY_STEPS, type BenchWorld } from './workspace.js';

export interface PoolOptions {
  readonly levels: readonly number[];
  readonly levelMs: number;
  readonly fairnessMs: number;
  readonly fairnessPool: number;
  readonly slotHoldMs: number;
  readonly floodInFlight: number;
  readonly lightClients: number;
  readonly slowRuns: number;
}

const ECHO: ContentBlock[] = [{ type: 'text', text: 'echo pool' }];
const TALK: ContentBlock[] = [{ type: 'text', text: 'Talk a lot.' }];

export async function poolBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: PoolOptions): Promise<void> {
  report.section(
    '4. Pool (echo provider, one daemon process shared by many clients)',
    'Each client is its own connection (all in the bench process). Default admission limits unless stated ' +
      '(maxConcurrentRuns 64, maxRunsPerConnection 32, maxQueued 1024).',
  );
  const parent = { sessionId: 'bench-parent', cwd: world.workspace };
  await clientsLevels(report, cleanup, parent, options);
  await fairness(report, cleanup, parent, options);
  await slowConsumer(report, cleanup, world, options);
}

async function clientsLevels(report: Report, cleanup: Cleanup, parent: StartParams['parent'], options: PoolOptions): Promise<void> {
  const daemon = await daemonProcess(cleanup);
  const pool = await clients(cleanup, daemon.socket, Math.max(...options.levels), 'pool');
  const table = new Table('Throughput and latency by number of clients (each: start → result → dispose, one run at a time)', [
    'clients',
    'runs/s',
    'start→ready p50 / p99',
    'start→result p50 / p99',
    'daemon CPU',
  ]);
  let best = 0;
  for (const level of options.levels) {
    let ready: number[] = [];
    let result: number[] = [];
    const once = async (worker: number): Promise<void> => {
      const t0 = performance.now();
      const run = await pool[worker]!.start('echo', { prompt: ECHO, parent, signal: abortSignal() });
      ready.push(performance.now() - t0);
      await run.result;
      result.push(performance.now() - t0);
      await run.dispose();
    };
    await closedLoops(level, 300, once);
    ready = [];
    result = [];
    const cpuBefore = cpuSecondsOf(daemon.pid);
    const load = await closedLoops(level, options.levelMs, once);
    const cpu = (cpuSecondsOf(daemon.pid) - cpuBefore) / (load.elapsedMs / 1000);
    const perSecond = (load.count / load.elapsedMs) * 1000;
    best = Math.max(best, perSecond);
    table.row(level, rate(perSecond), p50p99(summarize(ready)), p50p99(summarize(result)), pct(cpu));
  }
  report.table(table);
  report.verdict('≥ 3,000 trivial runs/s across several connections (pool, one run at a time per client)', `best ${rate(best)}`, best >= 3000);
}

async function fairness(report: Report, cleanup: Cleanup, parent: StartParams['parent'], options: PoolOptions): Promise<void> {
  const limits = { maxConcurrentRuns: options.fairnessPool, maxRunsPerConnection: options.fairnessPool, maxQueued: 1024 };
  const table = new Table(
    `Fairness: maxConcurrentRuns ${options.fairnessPool}, each run holds its slot ≈ ${options.slotHoldMs} ms; one flooding client ` +
      `(${options.floodInFlight} starts in flight) vs ${options.lightClients} light clients`,
    ['scenario', 'client', 'in flight', 'runs', 'share', 'start→ready p50 / p99 (incl. queue wait)'],
  );
  const prompt: ContentBlock[] = [{ type: 'text', text: `slow-start ${options.slotHoldMs}` }];
  for (const lightInFlight of [1, 8]) {
    const daemon = await daemonProcess(cleanup, { limits });
    const flood = await client(cleanup, daemon.socket, 'flood');
    const light = await clients(cleanup, daemon.socket, options.lightClients, 'light');
    const all = [flood, ...light];
    const inFlight = [options.floodInFlight, ...light.map(() => lightInFlight)];
    const workers: Array<{ client: number }> = [];
    inFlight.forEach((n, clientIndex) => {
      for (let i = 0; i < n; i++) workers.push({ client: clientIndex });
    });
    const latencies: number[][] = all.map(() => []);
    const done = all.map(() => 0);
    const disposals: Promise<void>[] = [];
    let measuring = false;
    const once = async (worker: number): Promise<void> => {
      const index = workers[worker]!.client;
      const t0 = performance.now();
      const run: RemoteSubagentRun = (await all[index]!.start('echo', { prompt, parent, signal: abortSignal() })) as RemoteSubagentRun;
      const ready = performance.now() - t0;
      await run.result;
      disposals.push(run.dispose());
      if (!measuring) return;
      latencies[index]!.push(ready);
      done[index]! += 1;
    };
    await closedLoops(workers.length, 400, once, () => Promise.all(disposals.splice(0)));
    measuring = true;
    await closedLoops(workers.length, options.fairnessMs, once, () => Promise.all(disposals.splice(0)));
    const total = done.reduce((a, b) => a + b, 0);
    const scenario = lightInFlight === 1 ? 'light clients one run at a time' : `light clients ${lightInFlight} in flight each`;
    all.forEach((_, i) => {
      table.row(
        i === 0 ? scenario : '',
        i === 0 ? 'flood' : `light ${i}`,
        inFlight[i]!,
        done[i]!,
        pct(done[i]! / total),
        p50p99(summarize(latencies[i]!)),
      );
    });
  }
  table.note(
    'The admission queue grants freed slots round-robin across connections. With every client backlogged (second scenario) an even ' +
      `split is ${pct(1 / (options.lightClients + 1))} each. A light client running one start at a time cannot use a larger share; its ` +
      'start latency is the fairness signal there: under a FIFO queue it would wait behind the flooder’s whole backlog (≈ the flooder’s own latency).',
  );
  report.table(table);
}

/**
 * A client that stops reading while its runs stream: `slowRuns` talkative spawn children
 * (CHATTY_STEPS steps, each streaming ~8 KiB of text and a tool call) started over a raw
 * socket that is paused right after `initialize`.
 */
async function slowConsumer(report: Report, cleanup: Cleanup, world: BenchWorld, options: PoolOptions): Promise<void> {
  const parent = { sessionId: 'bench-parent', cwd: world.workspace };
  const daemon = await daemonProcess(cleanup, { model: { default: `scripted:${world.chatty}` } });
  const normal = await client(cleanup, daemon.socket, 'normal');
  const probe = async (count: number): Promise<number> => {
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const run = await normal.start('echo', { prompt: ECHO, parent, signal: abortSignal() });
      samples.push(performance.now() - t0);
      await run.result;
      await run.dispose();
    }
    return summarize(samples).p50;
  };
  const status = (): ReturnType<RemoteSubagentService['ops']['status']> => normal.ops.status();

  // A reading client first: how many run events and bytes one talkative run streams.
  let perRunEvents = 0;
  let perRunBytes = 0;
  const control = await normal.start('spawn', {
    prompt: TALK,
    parent,
    signal: abortSignal(),
    onEvent: (event) => {
      perRunEvents += 1;
      perRunBytes += JSON.stringify(event).length;
    },
  });
  const controlResult = await control.result;
  if (controlResult.stopReason !== 'completed') throw new Error(`slow consumer: the control run ended ${controlResult.stopReason}`);
  await control.dispose();
  await probe(300);
  await sleep(300);
  const before = { rss: rssOf(daemon.pid), latency: await probe(100), gc: await daemon.gcMemory() };

  const raw = await RawClient.initialized(daemon.socket);
  cleanup.defer('close the raw client', () => raw.close());
  raw.pause();
  const sampler = new RssSampler(daemon.pid);
  const settledBefore = (await status()).runs.settled;
  for (let i = 0; i < options.slowRuns; i++) raw.send('subagent/start', { provider: 'spawn', prompt: TALK, parent, stream: true });
  const during = { rss: Number.NaN, latency: Number.NaN, gc: { rss: Number.NaN, heapUsed: Number.NaN } };
  try {
    // While its runs stream and it reads nothing: another client's latency, then wait for the runs to end.
    during.latency = await probe(100);
    const deadline = Date.now() + 30_000;
    while ((await status()).runs.settled - settledBefore < options.slowRuns && !raw.closed) {
      if (Date.now() > deadline) throw new Error('slow consumer: the runs did not finish in 30 s');
      await sleep(100);
    }
    await sleep(300);
    during.rss = sampler.sample();
    during.gc = await daemon.gcMemory();
  } finally {
    sampler.stop();
  }
  raw.resume();
  await raw.until(() => raw.responses >= options.slowRuns + 1 && raw.count('subagent/end') >= options.slowRuns, 30_000, 'the backlog');
  // Read only now: a paused socket does not see the daemon close it.
  const cutOff = raw.closed;
  const events = raw.runEvents;
  const ends = raw.count('subagent/end');
  const received = raw.bytesIn;
  raw.close();
  await sleep(1000);
  const after = { rss: rssOf(daemon.pid), latency: await probe(100), gc: await daemon.gcMemory() };

  const streamed = options.slowRuns * perRunEvents;
  const table = new Table(
    `Slow consumer: a raw client starts ${options.slowRuns} streamed spawn runs (${CHATTY_STEPS} steps, ≈ ${bytes(perRunBytes)} of ` +
      `run events each, ${bytes(options.slowRuns * perRunBytes)} in all) and reads nothing until they have all ended`,
    ['moment', 'daemon RSS', 'RSS after a full GC', 'heapUsed after a full GC', 'another client: echo start→ready p50'],
  );
  table.row('before', bytes(before.rss), bytes(before.gc.rss), bytes(before.gc.heapUsed), ms(before.latency));
  table.row(
    'its runs streaming, then ended; nothing read',
    `${bytes(during.rss)} (peak ${bytes(sampler.peak)})`,
    bytes(during.gc.rss),
    bytes(during.gc.heapUsed),
    ms(during.latency),
  );
  table.row('after it read everything and disconnected (+1 s)', bytes(after.rss), bytes(after.gc.rss), bytes(after.gc.heapUsed), ms(after.latency));
  table.note(
    cutOff
      ? `The daemon closed the non-reading connection before its runs ended (it received ${bytes(received)}, ${events} run events, ${ends} subagent/end).`
      : `Once it read again the client received ${bytes(received)}: ${ends} of ${options.slowRuns} subagent/end, and ${events} of the ` +
          `${streamed} run events its runs produced (${pct(1 - events / streamed)} held back and dropped by the daemon).`,
  );
  table.note(
    'RSS from /proc (peak sampled every 20 ms); "after a full GC" = what the daemon holds live. The latency probe is a separate, ' +
      'reading connection, measured while the runs stream (row 2) and while nothing else runs (rows 1 and 3).',
  );
  report.table(table);
}
