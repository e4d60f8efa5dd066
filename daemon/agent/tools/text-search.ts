/**
 * The matching half of `search_text`, built so no search can hold the event loop: patterns run
 * on re2js (RE2 semantics, linear in the text: `(a+)+$` cannot backtrack), each line is matched
 * on at most MAX_MATCHED_LINE_CHARS, the pattern length is bounded, and the caller gives the loop
 * back (and looks at its abort signal) whenever a slice of work has used SLICE_MS.
 *
 * RE2 refuses lookaround, backreferences and repeat counts over 1000; such a pattern gets a clear
 * tool error that says so, instead of a different engine.
 */
import { createRequire } from 'node:module';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { RE2JS } from 're2js';

// The engine loads with the first search, not with the daemon (its import is ~15 ms of CPU and
// ~2 MiB at every start). Synchronous: compiling a query is.
let engine: typeof RE2JS | undefined;
const re2 = (): typeof RE2JS => (engine ??= (createRequire(import.meta.url)('re2js') as typeof import('re2js')).RE2JS);

/** Longest query accepted: matching costs text length × pattern size. */
export const MAX_QUERY_CHARS = 256;
/** Longer lines are matched on their first this-many characters (minified files, data dumps). */
export const MAX_MATCHED_LINE_CHARS = 4096;
/** Work between two turns of the event loop. Measured, not asserted: see docs/security.md. */
const SLICE_MS = 2;

export interface LineMatcher {
  test(line: string): boolean;
}

/** A compiled query, or the message the model should read when RE2 refuses it. */
export function compileQuery(query: string, regex: boolean, ignoreCase: boolean): LineMatcher | string {
  const RE2 = re2();
  const flags = ignoreCase ? RE2.CASE_INSENSITIVE : 0;
  let compiled: RE2JS;
  try {
    compiled = RE2.compile(regex ? query : RE2.quote(query), flags);
  } catch (error) {
    return `Invalid regular expression (search_text uses RE2 syntax: no lookahead, lookbehind or backreferences; repeat counts up to 1000): ${(error as Error).message}`;
  }
  return {
    test: (line) => compiled.matcher(line.length > MAX_MATCHED_LINE_CHARS ? line.slice(0, MAX_MATCHED_LINE_CHARS) : line).find(),
  };
}

/**
 * Hands the event loop back once a slice of synchronous work has used its time. An abort can
 * only be delivered while the loop runs, so checking the signal after each yield is enough.
 */
export class Slicer {
  private sliceStart = performance.now();
  /** How many times the loop was given back. */
  yields = 0;

  constructor(private readonly signal: AbortSignal) {}

  /** Whether the current slice has used its time; cheap enough to call per line. */
  due(): boolean {
    return performance.now() - this.sliceStart >= SLICE_MS;
  }

  /** Gives the loop one turn; true when the search must stop. */
  async yieldTurn(): Promise<boolean> {
    await nextTurn();
    this.yields += 1;
    this.sliceStart = performance.now();
    return this.signal.aborted;
  }
}
