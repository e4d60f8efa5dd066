/**
 * Sample statistics for the benchmarks. Percentiles use the nearest-rank method on the sorted
 * samples: p-th percentile = the smallest sample with at least p % of the samples at or below it
 * (so p99 of 100 samples is the 99th smallest, and p99 of 20 samples is the largest).
 */

export interface Summary {
  readonly n: number;
  readonly min: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((acc, x) => acc + x, 0);
  return {
    n: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length > 0 ? sum / sorted.length : Number.NaN,
  };
}

export function median(samples: readonly number[]): number {
  return percentile([...samples].sort((a, b) => a - b), 50);
}

/** The median of paired values and their range: how alternating pairs are reported. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function spreadOf(values: readonly number[]): Spread {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return { median: percentile(sorted, 50), min: sorted[0] ?? Number.NaN, max: sorted[sorted.length - 1] ?? Number.NaN };
}

/** Per-pair ratios a[i] / b[i]. */
export function ratios(a: readonly number[], b: readonly number[]): number[] {
  return a.map((x, i) => x / b[i]!);
}

// --- formatting ---------------------------------------------------------------------------------

export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value < 1) return `${value.toFixed(3)} ms`;
  if (value < 10) return `${value.toFixed(2)} ms`;
  if (value < 1000) return `${value.toFixed(1)} ms`;
  return `${(value / 1000).toFixed(2)} s`;
}

export function rate(perSecond: number, unit = '/s'): string {
  if (!Number.isFinite(perSecond)) return 'n/a';
  if (perSecond >= 100) return `${Math.round(perSecond).toLocaleString('en-US')}${unit}`;
  return `${perSecond.toFixed(1)}${unit}`;
}

export function bytes(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  const sign = value < 0 ? '-' : '';
  const abs = Math.abs(value);
  if (abs < 1024) return `${sign}${abs.toFixed(0)} B`;
  if (abs < 1024 * 1024) return `${sign}${(abs / 1024).toFixed(1)} KiB`;
  return `${sign}${(abs / 1024 / 1024).toFixed(1)} MiB`;
}

export function ratio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

export function pct(value: number): string {
  return Number.isFinite(value) ? `${(value * 100).toFixed(1)} %` : 'n/a';
}

/** "p50 / p99" in one cell. */
export function p50p99(summary: Summary): string {
  return `${ms(summary.p50)} / ${ms(summary.p99)}`;
}

/** "median (min – max)" of a spread, each value formatted by `format`. */
export function spreadText(spread: Spread, format: (value: number) => string): string {
  return `${format(spread.median)} (${format(spread.min)} – ${format(spread.max)})`;
}
