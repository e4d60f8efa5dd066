/**
 * `npm run bench`: every benchmark in one run, printed as tables and written to BENCHMARKS.md.
 * Each section is bounded in time, and everything it starts is torn down even when it fails.
 * `node dist/bench/run.js wire children` runs only the named sections (and writes no file);
 * `--quick` (`npm run bench:quick`) runs every section with small budgets (and fewer configurations: one
 * pool level, one cluster size, no idle-memory table), in under a minute with the build,
 * and writes no file either: its figures are for a quick look, not for BENCHMARKS.md.
 */
import { acpBench } from './acp.js';
import { acpWarmBench } from './acp-warm.js';
import { join } from 'node:path';
import { childAgents } from './children.js';
import { clusterBench } from './cluster.js';
import { facesBench } from './faces.js';
import { REPO } from './daemons.js';
import { longRunBench } from './long-run.js';
import { memoryBench } from './memory.js';
import { hotPathProfile } from './hot-path-profile.js';
import { cpuTicks, formatLoad, machine, stealSince } from './machine.js';
import { writeBenchmarks } from './markdown.js';
import { poolBench } from './pool.js';
import { startupBench } from './startup.js';
import { storedRunsBench } from './stored-runs.js';
import { streamingBench } from './streaming.js';
import { upstreamBench } from './upstream.js';
import { Cleanup, withTimeout } from './procs.js';
import { Report } from './report.js';
import { wireOverhead } from './wire.js';
import { worktreesBench } from './worktrees.js';
import { makeWorld, type BenchWorld } from './workspace.js';

const report = new Report();
const quick = process.argv.includes('--quick');
const only = process.argv.slice(2).filter((arg) => arg !== '--quick');
/** A budget, cut down for --quick. */
const q = (full: number, small: number): number => (quick ? small : full);

interface SectionRun {
  readonly name: string;
  readonly timeoutMs: number;
  readonly run: (cleanup: Cleanup, world: BenchWorld) => Promise<void>;
}

const sections: SectionRun[] = [
  {
    name: 'wire',
    timeoutMs: 90_000,
    run: (cleanup) =>
      wireOverhead(report, cleanup, {
        rounds: q(10, 3),
        // Warm-up past V8's top tier for every configuration alike: a function the daemon or the
        // client runs once per run is optimized by TurboFan only after ~3,000 calls, and a fresh
        // daemon's start→ready settles only after ~4,500 runs (0.61 ms in its first 1,500, 0.35-0.40 ms
        // from 4,500 on). With 200, the daemon rows measured the warming daemon against floors whose
        // little code is optimized at once; a long-lived daemon serves in the warm regime.
        latency: { warmup: q(5000, 500), max: q(4000, 600), budgetMs: q(3000, 450) },
        throughputMs: q(1500, 400),
        throughputPairs: q(5, 1),
        connections: [4, 8],
        pipelineDepth: 8,
      }),
  },
  {
    name: 'profile',
    timeoutMs: 60_000,
    run: (cleanup) => hotPathProfile(report, cleanup, { seconds: q(5, 1), top: 12 }),
  },
  {
    name: 'children',
    timeoutMs: 150_000,
    run: (cleanup, world) =>
      childAgents(report, cleanup, world, {
        // Warmed up as the wire section is, within the section's budget: 1,000 five-step runs
        // optimize what runs per step and per tool call; the steady state a long-lived daemon serves in.
        perRun: { warmup: q(1000, 5), max: q(400, 40), budgetMs: q(6000, 1000) },
        perRunPairs: q(10, 3),
        levels: quick ? [100] : [1, 10, 100, 1000],
        minRunsPerLevel: q(40, 10),
        busyBudgetMs: (level) => q(level >= 1000 ? 8_000 : level >= 100 ? 5_000 : 3_000, 1_000),
        scalingBudgetMs: q(60_000, 8_000),
        connections: 4,
      }),
  },
  {
    name: 'streaming',
    timeoutMs: 60_000,
    run: (cleanup, world) => streamingBench(report, cleanup, world, { pairs: q(5, 1), budgetMs: q(2000, 600) }),
  },
  {
    name: 'upstream',
    timeoutMs: 120_000,
    run: (cleanup, world) => upstreamBench(report, cleanup, world, { children: 40, streamLimit: 4, streamMs: q(1000, 400), poolRequests: q(1000, 200) }),
  },
  {
    name: 'memory',
    timeoutMs: 300_000,
    run: () => memoryBench(report, { floodMib: q(50, 10), nonReaderMib: q(20, 5) }),
  },
  {
    name: 'long-run',
    timeoutMs: 240_000,
    run: (cleanup, world) => longRunBench(report, cleanup, world, { steps: q(1000, 100), pairs: q(7, 1) }),
  },
  {
    name: 'acp',
    timeoutMs: 90_000,
    run: (cleanup, world) => acpBench(report, cleanup, world, { starts: q(6, 2), prompts: q(40, 10), warmupPrompts: 5 }),
  },
  {
    name: 'acp-warm',
    timeoutMs: 240_000,
    run: (cleanup, world) => acpWarmBench(report, cleanup, world, { pairs: q(10, 3), qwenPairs: q(4, 0) }),
  },
  {
    name: 'pool',
    timeoutMs: 90_000,
    run: (cleanup, world) =>
      poolBench(report, cleanup, world, {
        levels: quick ? [50] : [1, 10, 50],
        levelMs: q(2000, 500),
        fairnessMs: q(2500, 500),
        fairnessPool: 4,
        slotHoldMs: 5,
        floodInFlight: 64,
        lightClients: 3,
        slowRuns: q(30, 6),
      }),
  },
  {
    name: 'cluster',
    timeoutMs: 180_000,
    run: (cleanup) =>
      clusterBench(report, cleanup, {
        clients: 4,
        inFlight: q(8, 4),
        durationMs: q(2000, 1000),
        warmupMs: q(3000, 250),
        pairedRounds: q(7, 1),
        cap: 64,
        failovers: q(3, 1),
        members: quick ? [] : [2, 3],
        failoverStepMs: q(6000, 2500),
      }),
  },
  {
    name: 'startup',
    timeoutMs: 240_000,
    run: (cleanup) => startupBench(report, cleanup, { pairs: q(10, 3), runs: q(1000, 0) }),
  },
  {
    name: 'faces',
    timeoutMs: 90_000,
    run: (cleanup, world) => facesBench(report, cleanup, world, { calls: q(40, 8), warmup: q(5, 2) }),
  },
  {
    name: 'stored-runs',
    timeoutMs: 300_000,
    run: (cleanup) =>
      storedRunsBench(report, cleanup, {
        sizes: quick ? [0, 100_000] : [0, 100_000, 1_000_000],
        rounds: q(5, 2),
        lists: q(20, 5),
        largeOutput: { steps: q(3, 2), runs: q(1000, 200) },
      }),
  },
  {
    name: 'worktrees',
    timeoutMs: 300_000,
    run: (cleanup) => worktreesBench(report, cleanup, { files: 10_000, pairs: q(10, 3) }),
  },
];

const host = machine();
console.log(`subagentd benchmarks — ${host.date}, ${host.nproc} CPUs (${host.cpu}), node ${host.node}, load ${host.loadStart}`);
const begun = performance.now();
const worldCleanup = new Cleanup();
const active = new Set<Cleanup>([worldCleanup]);
let interrupted = false;
// Ctrl-C or a kill: tear down every daemon, agent and temp dir this run made, then leave.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    console.error(`\n${signal}: cleaning up…`);
    void Promise.all([...active].map((c) => c.runAll())).finally(() => process.exit(130));
  });
}
// A section abandoned by its timeout may still reject in the background: record it, don't crash.
process.on('unhandledRejection', (error) => report.failure('unhandled rejection', error));
try {
  const world = makeWorld(worldCleanup);
  for (const section of sections) {
    if (interrupted) break;
    if (only.length > 0 && !only.includes(section.name)) continue;
    const cleanup = new Cleanup();
    active.add(cleanup);
    const started = performance.now();
    const ticks = cpuTicks();
    try {
      await withTimeout(section.run(cleanup, world), section.timeoutMs, section.name);
    } catch (error) {
      report.failure(section.name, error);
    } finally {
      await cleanup.runAll();
      active.delete(cleanup);
    }
    console.log(`  (${section.name}: ${((performance.now() - started) / 1000).toFixed(1)} s, CPU time stolen by the host ${stealSince(ticks)})`);
  }
} finally {
  await worldCleanup.runAll();
}

const duration = (performance.now() - begun) / 1000;
console.log(`\nTargets:`);
for (const v of report.verdicts) console.log(`  ${v.met ? 'met   ' : 'MISSED'}  ${v.target}: ${v.measured}`);
if (report.failures.length > 0) console.log(`${report.failures.length} section(s) failed; see above.`);
console.log(`Done in ${duration.toFixed(0)} s; load average now ${formatLoad()}; CPU time stolen by the host ${stealSince(host.ticksStart)}.`);
if (only.length === 0 && !quick && !interrupted) {
  const path = join(REPO, 'BENCHMARKS.md');
  writeBenchmarks(path, report, host, formatLoad(), duration, stealSince(host.ticksStart));
  console.log(`Wrote ${path}`);
}
process.exitCode = report.failures.length > 0 ? 1 : 0;
