/**
 * `runs` and `inspect` with no daemon running: they read the state dir themselves, as the daemon
 * would, and say so. The state-dir lock is held for the read, so no daemon starts meanwhile (and
 * one that holds it, but does not answer on the socket, is named instead of read around). Runs a
 * daemon left running when it died are shown as it recorded them: the next daemon to start marks
 * them interrupted.
 */
import { existsSync } from 'node:fs';
import { SubagentError, type RunInfo, type RunsListParams, type RunsListResult, type SessionEvent, type SessionHeader } from '../protocol/index.js';
import { acquireStateLock, StateDirLockedError } from '../daemon/ops/state-lock.js';
import { sessionFilePath, stateFiles } from '../daemon/ops/paths.js';
import { RunIndex } from '../daemon/store/run-index.js';
import { pageOfRuns } from '../daemon/store/run-paging.js';
import { readSessionFile } from '../daemon/store/session-reader.js';
import { runInfo, storedState } from '../daemon/service/run-views.js';

/** The line printed (on stderr) before an offline answer. */
export const offlineNotice = (stateDir: string): string => `subagentd: no daemon is running; read offline from the state dir ${stateDir}`;

export interface OfflineRun {
  readonly run: RunInfo;
  readonly session?: { header: SessionHeader; events: readonly SessionEvent[] };
}

async function withIndex<T>(stateDir: string, read: (index: RunIndex, sessions: string) => Promise<T>): Promise<T> {
  const files = stateFiles(stateDir);
  if (!existsSync(files.runIndex)) throw new SubagentError('UNKNOWN_RUN', `no runs recorded in ${stateDir} (no ${files.runIndex}): has a daemon run with this --state-dir?`);
  let release: () => void;
  try {
    release = acquireStateLock(files.lock);
  } catch (error) {
    if (error instanceof StateDirLockedError) {
      throw new SubagentError('DAEMON_UNAVAILABLE', `${error.message}, but it does not answer on its socket: is --socket right? (\`subagentd status\` names both)`);
    }
    throw error;
  }
  const index = new RunIndex(files.runIndex);
  try {
    return await read(index, files.sessions);
  } finally {
    index.close();
    release();
  }
}

export function offlineRuns(stateDir: string, params: RunsListParams): Promise<RunsListResult> {
  return withIndex(stateDir, async (index) => {
    const listed = (function* () {
      for (const stored of index.newestFirst()) {
        const state = storedState(stored);
        yield { runId: stored.runId, state, provider: stored.provider, startedAt: stored.startedAt, mine: false, info: () => runInfo(stored, state, false) };
      }
    })();
    return pageOfRuns(listed, params);
  });
}

export function offlineRun(stateDir: string, runId: string): Promise<OfflineRun> {
  return withIndex(stateDir, async (index, sessions) => {
    const stored = index.get(runId);
    if (!stored) throw new SubagentError('UNKNOWN_RUN', `no run with id ${runId} in ${stateDir}`, { field: '/runId' });
    const run = runInfo(stored, storedState(stored), false);
    const file = sessionFilePath(sessions, stored.id);
    // An ACP child keeps no session log of ours: its record is all there is.
    if (!existsSync(file)) return { run };
    const { header, events } = await readSessionFile(file);
    return { run, session: { header, events } };
  });
}
