/**
 * V8's optimizing compiler (TurboFan) is held off while the daemon loads, and let go once it
 * serves. Loading ~190 modules makes a few functions hot for a moment (Node's CommonJS export
 * lexer on each package, path normalising during resolution); optimizing them costs tens of ms
 * of CPU and maps in the compiler's code and working memory, about 11 MiB of an idle daemon's
 * RSS (measured: 66 MiB → 55 MiB at accepting), for code that never runs again. Serving code
 * that gets hot later is optimized as usual: the hold ends before the first connection is read.
 *
 * Rules: `holdOptimizingCompiler` only for the daemon command (other commands are short or
 * interactive); the daemon calls `releaseOptimizingCompiler` (idempotent) once its code is loaded,
 * before it serves; a start that fails before then ends the process. The flag is V8's own `--turbofan`, read at each tier-up
 * decision; a process started with `--no-turbofan` (or `--jitless`) keeps its choice.
 * Failures: none; `setFlagsFromString` ignores flags it does not know.
 */
import { setFlagsFromString } from 'node:v8';

let held = false;

/** Interpreted and baseline code only from now on, until `releaseOptimizingCompiler`. */
export function holdOptimizingCompiler(): void {
  if (held || process.execArgv.some((flag) => /^--(no-turbofan|no-opt|jitless)$/.test(flag))) return;
  held = true;
  setFlagsFromString('--no-turbofan');
}

/** Hot code is optimized again. */
export function releaseOptimizingCompiler(): void {
  if (!held) return;
  held = false;
  setFlagsFromString('--turbofan');
}
