/**
 * The run table's retention of disposed runs: they stay answerable to run/wait and run/inspect
 * up to a count and up to a size of their output, the oldest going first, never the run just
 * disposed, and never a run that is not disposed.
 */
import { describe, expect, it } from 'vitest';
import { RunTable, type LiveRun } from '../daemon/service/run-table.js';

const MiB = 1024 * 1024;

/** A run as the table sees it: only what retention reads (the rest of a LiveRun is not touched). */
function liveRun(n: number, outputBytes: number): LiveRun {
  return {
    runId: `run-${n}`,
    state: 'running',
    result: { output: [{ type: 'text', text: 'x'.repeat(outputBytes) }], stopReason: 'completed' },
  } as unknown as LiveRun;
}

function dispose(table: RunTable, run: LiveRun): void {
  run.state = 'disposed';
  table.disposed(run);
}

const held = (table: RunTable): string[] => [...table.values()].map((run) => run.runId);

describe('RunTable retention of disposed runs', () => {
  it('holds at most 16 MiB of their output: the oldest disposed go first, running runs stay', () => {
    const table = new RunTable();
    const runs = [0, 1, 2, 3, 4, 5].map((n) => liveRun(n, 4 * MiB));
    for (const run of runs) table.add(run);
    for (const n of [1, 2, 3, 4]) dispose(table, runs[n]!); // 16 MiB: at the bound
    expect(held(table)).toEqual(['run-0', 'run-1', 'run-2', 'run-3', 'run-4', 'run-5']);
    dispose(table, runs[5]!); // 20 MiB: run-1, the oldest disposed, goes
    expect(held(table)).toEqual(['run-0', 'run-2', 'run-3', 'run-4', 'run-5']);
    expect(table.get('run-0')?.state).toBe('running');
  });

  it('keeps the run just disposed however large its output, until the next one', () => {
    const table = new RunTable();
    const big = liveRun(0, 20 * MiB);
    const small = liveRun(1, 10);
    table.add(big);
    table.add(small);
    dispose(table, big);
    expect(held(table)).toEqual(['run-0', 'run-1']);
    dispose(table, small);
    expect(held(table)).toEqual(['run-1']);
  });

  it('holds at most 1,000 disposed runs however small', () => {
    const table = new RunTable();
    for (let n = 0; n < 1001; n++) {
      const run = liveRun(n, 10);
      table.add(run);
      dispose(table, run);
    }
    const ids = held(table);
    expect(ids).toHaveLength(1000);
    expect(ids[0]).toBe('run-1');
  });

  it('forgets a forgotten run\'s output too: the bound counts only what is held', () => {
    const table = new RunTable();
    const first = liveRun(0, 12 * MiB);
    table.add(first);
    dispose(table, first);
    table.forget(first);
    const next = liveRun(1, 12 * MiB);
    const other = liveRun(2, 1);
    table.add(next);
    table.add(other);
    dispose(table, next);
    dispose(table, other); // 12 MiB + 1 byte held: within the bound
    expect(held(table)).toEqual(['run-1', 'run-2']);
  });
});
