/**
 * One stored run as the run index and the archive hold it (one JSON line per change): the
 * ledger's StoredRun. Lines written before records named their worker and revision carry
 * `daemonEpoch`/`daemonPid` instead; `readStoredRun` reads both, so an upgraded daemon answers
 * for its predecessor's runs.
 */
import { hostname } from 'node:os';
import type { StoredRun, StoredState } from './run-ledger.js';

export type IndexedRun = StoredRun;
export type IndexedState = StoredState;

/** A parsed line as a record, or undefined when it is not one. */
export function readStoredRun(line: string): StoredRun | undefined {
  return storedRunFrom(JSON.parse(line));
}

/** A parsed JSON value as a record, or undefined when it is not one. */
export function storedRunFrom(value: unknown): StoredRun | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const run = value as Partial<StoredRun> & { daemonEpoch?: string; daemonPid?: number };
  if (typeof run.runId !== 'string' || typeof run.state !== 'string') return undefined;
  if (run.worker !== undefined && run.revision !== undefined) return run as StoredRun;
  const { daemonEpoch, daemonPid, ...rest } = run;
  return {
    ...rest,
    worker: run.worker ?? { id: daemonEpoch ?? 'unknown', host: legacyHost(), pid: daemonPid ?? 0 },
    revision: run.revision ?? 0,
  } as StoredRun;
}

/** A line without a worker was written by a daemon of this machine (the index is per state dir). */
let host: string | undefined;
const legacyHost = (): string => (host ??= hostname());
