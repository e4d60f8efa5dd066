/**
 * `runs/list`: newest first, filtered, one page at a time. The cursor is the id of the last run
 * of the previous page, so a page costs what it skips and returns, never a pass over every stored
 * run, and runs started meanwhile never shift a page under the reader.
 */
import type { RunInfo, RunsListParams, RunsListResult } from '../../protocol/index.js';
import type { ListedRun } from './run-ledger.js';

export function pageOfRuns(newestFirst: Iterable<ListedRun>, params: RunsListParams): RunsListResult {
  const limit = params.limit ?? Number.POSITIVE_INFINITY;
  const runs: RunInfo[] = [];
  let skipping = params.cursor !== undefined;
  for (const run of newestFirst) {
    if (skipping) {
      skipping = run.runId !== params.cursor;
      continue;
    }
    if (!matches(run, params)) continue;
    if (runs.length === limit) return { runs, nextCursor: runs[runs.length - 1]!.runId };
    runs.push(run.info());
  }
  return { runs };
}

function matches(run: ListedRun, params: RunsListParams): boolean {
  return (
    (params.state === undefined || run.state === params.state) &&
    (params.provider === undefined || run.provider === params.provider) &&
    (params.mine === undefined || run.mine === params.mine) &&
    (params.since === undefined || run.startedAt >= params.since)
  );
}
