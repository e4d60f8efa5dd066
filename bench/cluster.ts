/**
 * The cluster (docs/cluster.md) against the single-daemon default, in one run: throughput and
 * start→ready with 1, 2 and 3 members on one nats-server, the same closed-loop load as the
 * default daemon gets; then failover time from kill -9 of the executing member to the run
 * resumed on another member (its record's attempt 2 with the child's id), and to its outcome.
 *
 * Runs are the fixture `echo` provider (no model, completes at once), so the figures are the
 * scheduling cost: queue, records, relay. Every member runs on this machine; the cap is set
 * high enough that it is not what limits throughput.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RemoteSubagentService } from '../client/index.js';
import type { ClusterRun } from '../daemon/cluster/cluster-run.js';
import { clusterNames } from '../daemon/cluster/names.js';
import { NatsLink } from '../daemon/cluster/nats-link.js';
import { RunRecords } from '../daemon/cluster/run-records.js';
import { startNatsServer } from '../test/support/nats-server.js';
import { client, daemonProcess, type DaemonProcess } from './daemons.js';
import { formatLoad } from './machine.js';
import { sleep, type Cleanup } from './procs.js';
import type { Report } from './report.js';
import { median, ms, p50p99, rate, summarize } from './stats.js';
import { Table } from './table.js';

export interface ClusterBenchOptions {
  readonly clients: number;
  /** Runs each client keeps in flight. */
  readonly inFlight: number;
  /** Measured seconds of each setup; of each round, for the single daemon and the pool of one. */
  readonly durationMs: number;
  /** Unmeasured load before each setup's measured seconds. */
  readonly warmupMs: number;
  /**
   * Rounds in which the single daemon and the pool of one are measured one after the other: the
   * targets' ratios are the medians of the rounds' ratios, so that a change in the machine's speed
   * between two measurements (this machine is a VM whose pace moves within a minute) hits both.
   */
  readonly pairedRounds: number;
  readonly cap: number;
  /** Failover samples with a 1 s lease. */
  readonly failovers: number;
  /** Larger cluster sizes of the throughput table, each measured once after the paired rounds. */
  readonly members: readonly number[];
  /** How long the failover run's model step takes: the kill and the heir's start must fit in it. */
  readonly failoverStepMs: number;
}

const parent = { sessionId: 'bench-cluster', cwd: process.cwd() };

export async function clusterBench(report: Report, cleanup: Cleanup, options: ClusterBenchOptions): Promise<void> {
  report.section(
    'Cluster: members on one NATS server',
    `Closed loop: ${options.clients} clients, ${options.inFlight} runs in flight each, spread over the members; runs of the fixture echo provider (the scheduling cost only). The single daemon and the pool of one are measured in ${options.pairedRounds} rounds, one after the other, ${options.durationMs / 1000} s each after ${options.warmupMs / 1000} s of the same load unmeasured at first; their ratios are the medians of the rounds'. The larger pools are measured once, ${options.durationMs / 1000} s after ${options.warmupMs / 1000} s unmeasured. limits.maxConcurrentRuns ${options.cap}, cluster-wide in the cluster rows. Load at start: ${formatLoad()}.`,
  );
  const phaseRows: string[][] = [];
  const throughput = new Table('throughput and start→ready', ['setup', 'runs/s', 'vs default', 'start→ready p50 / p99', 'runs executed per member']);
  const single = await prepareLoad(cleanup, [await daemonProcess(cleanup, { limits: { maxConcurrentRuns: options.cap } })], options);
  const pool = await startPool(cleanup, 1, options);
  const pooled = await prepareLoad(cleanup, pool.daemons, options);
  const rounds: Array<{ single: number; pooled: number }> = [];
  for (let i = 0; i < options.pairedRounds; i++) rounds.push({ single: await single.measure(), pooled: await pooled.measure() });
  const ratio = median(rounds.map((r) => r.pooled / r.single));
  const roundRates = (pick: (r: { single: number; pooled: number }) => number): string => rounds.map((r) => rate(pick(r))).join(', ');
  throughput.row('single daemon (default, no NATS)', rate(single.perSecond()), '1.00', p50p99(summarize(single.ready)), '–');
  // docs/cluster.md's targets for a pooled start, as ratios to the single daemon of the same rounds.
  report.verdict(
    'one-member pool ≥ 0.3 of a single daemon\'s runs/s (4 connections × 8 in flight, same run)',
    `${ratio.toFixed(2)}, the median of ${rounds.length} paired rounds (pool of one ${roundRates((r) => r.pooled)} vs single daemon ${roundRates((r) => r.single)} runs/s)`,
    ratio >= 0.3,
  );
  const pooledReady = summarize(pooled.ready).p50;
  const alone = summarize(single.ready).p50;
  report.verdict('one-member pool start→ready p50 within 15 ms of a single daemon\'s (same load, same run)', `+${ms(pooledReady - alone)} (${ms(pooledReady)} vs ${ms(alone)})`, pooledReady - alone <= 15);
  const describe = async (members: number, { nats, daemons }: Pool, measured: PreparedLoad, vsSingle: number): Promise<void> => {
    const perMember = await executedPerMember(cleanup, nats.url, daemons);
    phaseRows.push([`${members} member${members > 1 ? 's' : ''}`, ...(await phasesOf(cleanup, nats.url, measured.samples))]);
    throughput.row(`${members} member${members > 1 ? 's' : ''}`, rate(measured.perSecond()), vsSingle.toFixed(2), p50p99(summarize(measured.ready)), perMember.join(' / '));
  };
  await describe(1, pool, pooled, ratio);
  await stopPool(pool);
  for (const members of options.members) {
    const larger = await startPool(cleanup, members, options);
    const measured = await prepareLoad(cleanup, larger.daemons, options);
    await measured.measure();
    await describe(members, larger, measured, measured.perSecond() / single.perSecond());
    await stopPool(larger);
  }
  throughput.note(`load average at the end: ${formatLoad()}; every member and the NATS server share this machine's CPUs`);
  report.table(throughput);
  const phases = new Table('where a pooled start→ready goes (p50 of each step, from the run records\' timestamps)', ['setup', 'local starts', 'client → queued', 'queued → claimed', 'claimed → child', 'child → client has it']);
  for (const row of phaseRows) phases.row(...row);
  phases.note('local starts = the share of runs their front executed at once on a spare ticket (docs/cluster.md, Local starts): queued = the front built the record (a local start\'s is written at its answer), claimed = it took the spare; otherwise queued = the front wrote the record, claimed = a member won it by compare-and-set; child = its child exists (startedAt); the last step is the record\'s trip back (a local start: its create) and the answer; millisecond clock, one machine');
  report.table(phases);

  const failover = new Table('failover: kill -9 of the executing member, 1 s lease', ['sample', 'kill → resumed elsewhere', 'kill → outcome at the owner']);
  const resumed: number[] = [];
  for (let i = 0; i < options.failovers; i++) {
    const sample = await failoverOnce(cleanup, options.failoverStepMs);
    resumed.push(sample.resumedMs);
    failover.row(i + 1, ms(sample.resumedMs), ms(sample.outcomeMs));
  }
  failover.note(`resumed = the run record shows attempt 2 on the other member (its child is then restored from the mirrored session); outcome = the owner has the result: the redone model step takes ${ms(options.failoverStepMs)} of it; the lease (ack_wait) is 1 s here, 15 s by default, and dominates`);
  report.table(failover);
  report.text(`Failover p50 ${ms(summarize(resumed).p50)} with a 1 s lease (kill -9 → resumed on another member).`);
  if (resumed.length > 0) report.verdict('failover: kill -9 of the executing member, resumed on another within the lease (+1 s for the redelivery and resume)', `p50 ${ms(summarize(resumed).p50)} with a 1 s lease`, summarize(resumed).p50 <= 2000);
}

/** SIGTERM, then wait (bounded) until the process is gone; SIGKILL after 5 s. */
async function stopProcess(pid: number): Promise<void> {
  const alive = (): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  process.kill(pid, 'SIGTERM');
  const deadline = performance.now() + 5000;
  while (alive() && performance.now() < deadline) await sleep(20);
  if (alive()) process.kill(pid, 'SIGKILL');
}

/** One measured start: its run id, and when (wall clock, ms) it was asked for and answered. */
interface StartSample {
  readonly runId: string;
  readonly askedAt: number;
  readonly answeredAt: number;
}

interface Pool {
  readonly nats: { readonly url: string; stop(): Promise<void> };
  readonly daemons: DaemonProcess[];
}

/** `members` daemons on a fresh nats-server. */
async function startPool(cleanup: Cleanup, members: number, options: ClusterBenchOptions): Promise<Pool> {
  const nats = await startNatsServer();
  cleanup.defer('stop nats-server', () => nats.stop());
  const daemons: DaemonProcess[] = [];
  for (let i = 0; i < members; i++) {
    daemons.push(await daemonProcess(cleanup, { limits: { maxConcurrentRuns: options.cap }, cluster: { nats: nats.url, ackWaitMs: 5000 } }));
  }
  return { nats, daemons };
}

/** Members leave before their server goes: none may linger and join the next pool on a reused port. */
async function stopPool({ nats, daemons }: Pool): Promise<void> {
  await Promise.all(daemons.map((d) => stopProcess(d.pid)));
  await nats.stop();
}


/** A setup's clients, connected and warmed up; `measure` runs the load once more, measured, and returns that round's runs/s. */
interface PreparedLoad {
  measure(): Promise<number>;
  /** Over every measured round. */
  perSecond(): number;
  readonly ready: number[];
  readonly samples: StartSample[];
}

async function prepareLoad(cleanup: Cleanup, daemons: readonly DaemonProcess[], options: ClusterBenchOptions): Promise<PreparedLoad> {
  const services: RemoteSubagentService[] = [];
  for (let i = 0; i < options.clients; i++) services.push(await client(cleanup, daemons[i % daemons.length]!.socket, `cluster-${i}`));
  const ready: number[] = [];
  const samples: StartSample[] = [];
  let done = 0;
  let measuredMs = 0;
  const loop = async (ms: number, measured: boolean): Promise<void> => {
    const until = performance.now() + ms;
    await Promise.all(
      services.flatMap((service) =>
        Array.from({ length: options.inFlight }, async () => {
          while (performance.now() < until) {
            const sample = await oneRun(service);
            if (!measured) continue;
            ready.push(sample.readyMs);
            samples.push(sample);
            done += 1;
          }
        }),
      ),
    );
  };
  // Warm-up under the same load, unmeasured: past the point where V8 optimizes each setup's
  // per-run code (the cluster's path is longer than the single daemon's, so a run or two per
  // client left it mostly unoptimized in the measured seconds).
  await loop(options.warmupMs, false);
  return {
    ready,
    samples,
    perSecond: () => done / (measuredMs / 1000),
    async measure() {
      const before = done;
      const started = performance.now();
      await loop(options.durationMs, true);
      const elapsed = performance.now() - started;
      measuredMs += elapsed;
      return (done - before) / (elapsed / 1000);
    },
  };
}

/** One run: start (measured to readiness), its result, dispose. */
async function oneRun(service: RemoteSubagentService): Promise<StartSample & { readyMs: number }> {
  const askedAt = Date.now();
  const begun = performance.now();
  const run = await service.start('echo', { prompt: [{ type: 'text', text: 'echo hi' }], parent, signal: AbortSignal.timeout(60_000) });
  const readyMs = performance.now() - begun;
  const answeredAt = Date.now();
  await run.result;
  await run.dispose();
  return { readyMs, runId: run.id, askedAt, answeredAt };
}

/** The p50 of each step of the measured starts, read from the pool's records (ISO times, ms). */
async function phasesOf(cleanup: Cleanup, url: string, samples: readonly StartSample[]): Promise<string[]> {
  const link = await NatsLink.open(url, { name: 'bench-observer' });
  cleanup.defer('close the observer link', () => link.close());
  const records = await RunRecords.open<ClusterRun>(link, clusterNames().recordsBucket);
  const steps: number[][] = [[], [], [], []];
  let local = 0;
  for (const sample of samples) {
    const record = records.seen(sample.runId)?.record;
    if (!record?.claimedAt || !record.startedAt) continue;
    if (record.local) local += 1;
    const [queued, claimed, child] = [Date.parse(record.queuedAt), Date.parse(record.claimedAt), Date.parse(record.startedAt)];
    [queued - sample.askedAt, claimed - queued, child - claimed, sample.answeredAt - child].forEach((value, i) => steps[i]!.push(value));
  }
  records.close();
  const share = steps[0]!.length > 0 ? `${Math.round((100 * local) / steps[0]!.length)} %` : '–';
  return [share, ...steps.map((values) => (values.length > 0 ? ms(summarize(values).p50) : '–'))];
}

async function executedPerMember(cleanup: Cleanup, url: string, daemons: readonly DaemonProcess[]): Promise<number[]> {
  const link = await NatsLink.open(url, { name: 'bench-observer' });
  cleanup.defer('close the observer link', () => link.close());
  const records = await RunRecords.open<ClusterRun>(link, clusterNames().recordsBucket);
  const counts = new Map<number, number>();
  for (const { record } of records.all()) if (record.worker) counts.set(record.worker.pid, (counts.get(record.worker.pid) ?? 0) + 1);
  records.close();
  return daemons.map((d) => counts.get(d.pid) ?? 0);
}

export async function failoverOnce(cleanup: Cleanup, stepMs: number): Promise<{ resumedMs: number; outcomeMs: number }> {
  const nats = await startNatsServer();
  cleanup.defer('stop nats-server', () => nats.stop());
  const dir = cleanup.tempDir();
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify({ steps: [{ text: 'working', delayMs: stepMs, toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] }, { text: 'done' }] }));
  const config = (slots?: number): Record<string, unknown> => ({
    model: { default: `scripted:${script}` },
    cluster: { nats: nats.url, ackWaitMs: 1000, ...(slots !== undefined && { slots }) },
  });
  const front = await daemonProcess(cleanup, config(0));
  const doomed = await daemonProcess(cleanup, config());
  const link = await NatsLink.open(nats.url, { name: 'bench-observer' });
  cleanup.defer('close the observer link', () => link.close());
  const records = await RunRecords.open<ClusterRun>(link, clusterNames().recordsBucket);
  cleanup.defer('stop the record watch', () => records.close());
  const service = await client(cleanup, front.socket, 'failover');
  const run = await service.start('spawn', { prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(60_000) });
  // Read with a round trip each time, not from a watch: the figure must not depend on the observer.
  while ((await records.get(run.id))?.record.childId === undefined) await sleep(5);
  const heir = await daemonProcess(cleanup, config());
  // Mid-step: the model's first answer takes `stepMs` (the heir's start took part of that).
  const killedAt = performance.now();
  process.kill(doomed.pid, 'SIGKILL');
  let resumedMs = 0;
  while (resumedMs === 0) {
    const seen = (await records.get(run.id))?.record;
    if (seen?.state !== 'running') throw new Error(`the run ended on its first member before the kill took effect (${seen?.state}); lengthen the step`);
    if (seen?.attempt === 2 && seen.worker?.pid === heir.pid) resumedMs = performance.now() - killedAt;
    else await sleep(5);
  }
  await run.result;
  const outcomeMs = performance.now() - killedAt;
  await run.dispose();
  return { resumedMs, outcomeMs };
}
