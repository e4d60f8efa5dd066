/** Bounded measurement loops: every loop stops at a sample count or a time budget, whichever first. */
import { median } from './stats.js';

export interface Bounds {
  /** Unmeasured iterations first (JIT, caches, connection warm-up). */
  readonly warmup: number;
  /** Most measured iterations. */
  readonly max: number;
  /** Most wall time for the measured iterations. */
  readonly budgetMs: number;
}

export interface SequentialResult {
  /** One array per value `once` returns, in order. */
  readonly samples: number[][];
  readonly count: number;
  readonly elapsedMs: number;
}

export interface InterleavedResult extends SequentialResult {
  /** Per round, the median of each value `once` returns: the pairs a ratio is taken over. */
  readonly roundMedians: number[][];
}

/** Runs `once` back to back; it returns the durations it measured (ms). */
export async function sequential(bounds: Bounds, once: () => Promise<number[]>): Promise<SequentialResult> {
  for (let i = 0; i < bounds.warmup; i++) await once();
  const samples: number[][] = [];
  const started = performance.now();
  const deadline = started + bounds.budgetMs;
  let count = 0;
  while (count < bounds.max && performance.now() < deadline) {
    const values = await once();
    values.forEach((v, i) => (samples[i] ??= []).push(v));
    count++;
  }
  return { samples, count, elapsedMs: performance.now() - started };
}

/**
 * Interleaves several configurations in rounds so that a machine whose load changes during the
 * run biases none of them; samples are pooled per configuration. Every other round runs them in
 * reverse (A B C, C B A, …): what one configuration leaves behind in the bench process (garbage for
 * its GC, cold caches) then falls on a different neighbour each round, not always on the next one.
 */
export async function interleaved(
  configs: ReadonlyArray<{ readonly name: string; readonly bounds: Bounds; readonly once: () => Promise<number[]> }>,
  rounds: number,
): Promise<Map<string, InterleavedResult>> {
  const pooled = new Map<string, { samples: number[][]; count: number; elapsedMs: number; roundMedians: number[][] }>();
  for (let round = 0; round < rounds; round++) {
    for (const config of round % 2 === 0 ? configs : [...configs].reverse()) {
      const bounds: Bounds = {
        warmup: round === 0 ? config.bounds.warmup : Math.min(20, config.bounds.warmup),
        max: Math.ceil(config.bounds.max / rounds),
        budgetMs: config.bounds.budgetMs / rounds,
      };
      const result = await sequential(bounds, config.once);
      const acc = pooled.get(config.name) ?? { samples: [], count: 0, elapsedMs: 0, roundMedians: [] };
      result.samples.forEach((values, i) => (acc.samples[i] ??= []).push(...values));
      acc.roundMedians.push(result.samples.map((values) => median(values)));
      acc.count += result.count;
      acc.elapsedMs += result.elapsedMs;
      pooled.set(config.name, acc);
    }
  }
  return pooled;
}

/**
 * Like `interleaved`, but within a round the configurations take turns run by run (A B C, then
 * C B A, …) rather than one whole block after another: a change of the machine's speed inside a
 * round (this VM's neighbours come and go within a second) then falls on every configuration of
 * the round alike. For runs of milliseconds, where a block of each would span a second or more.
 * Each configuration's warm-up runs first, as a block; a round ends when every configuration has
 * its share of `max` runs or the round's share of their budgets is spent.
 */
export async function alternating(
  configs: ReadonlyArray<{ readonly name: string; readonly bounds: Bounds; readonly once: () => Promise<number[]> }>,
  rounds: number,
): Promise<Map<string, InterleavedResult>> {
  for (const config of configs) for (let i = 0; i < config.bounds.warmup; i++) await config.once();
  const pooled = new Map(configs.map((config) => [config.name, { samples: [] as number[][], count: 0, elapsedMs: 0, roundMedians: [] as number[][] }]));
  const turns = Math.max(...configs.map((config) => Math.ceil(config.bounds.max / rounds)));
  const roundBudgetMs = configs.reduce((sum, config) => sum + config.bounds.budgetMs / rounds, 0);
  for (let round = 0; round < rounds; round++) {
    const inRound = new Map(configs.map((config) => [config.name, [] as number[][]]));
    const deadline = performance.now() + roundBudgetMs;
    for (let turn = 0; turn < turns && performance.now() < deadline; turn++) {
      for (const config of turn % 2 === 0 ? configs : [...configs].reverse()) {
        const started = performance.now();
        const values = await config.once();
        const acc = pooled.get(config.name)!;
        acc.elapsedMs += performance.now() - started;
        acc.count += 1;
        values.forEach((v, i) => {
          (acc.samples[i] ??= []).push(v);
          (inRound.get(config.name)![i] ??= []).push(v);
        });
      }
    }
    for (const config of configs) pooled.get(config.name)!.roundMedians.push(inRound.get(config.name)!.map((values) => median(values)));
  }
  return pooled;
}

export interface LoadResult {
  readonly count: number;
  readonly elapsedMs: number;
  /** Per-worker completed iterations. */
  readonly perWorker: number[];
}

/**
 * `workers` closed loops run `once(worker)` until the deadline; the elapsed time runs until the
 * last loop (and whatever `drain` waits for) has finished.
 */
export async function closedLoops(
  workers: number,
  durationMs: number,
  once: (worker: number) => Promise<void>,
  drain: () => Promise<unknown> = async () => undefined,
): Promise<LoadResult> {
  const perWorker = Array.from({ length: workers }, () => 0);
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    perWorker.map(async (_, worker) => {
      while (performance.now() < deadline) {
        await once(worker);
        perWorker[worker]! += 1;
      }
    }),
  );
  await drain();
  return { count: perWorker.reduce((a, b) => a + b, 0), elapsedMs: performance.now() - started, perWorker };
}
