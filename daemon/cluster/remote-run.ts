/**
 * The run handle a front gives its service for a child that some member of the pool executes,
 * whether the front queued the run (`cluster-provider.ts`) or took it over by re-attach
 * (`adopted-run.ts`). Its id and worker come from the pool record as the front last saw it (the
 * worker moves on a takeover); interrupts go to the executing member as control messages. The
 * caller adds `dispose` (its own rules) and, by presence, what its provider offers.
 */
import type { InterruptLevel, SubagentResult } from '../../protocol/index.js';
import type { DaemonRun } from '../provider.js';
import type { ClusterRun, WorkerRef } from './cluster-run.js';
import type { ControlMessage } from './cluster-worker.js';

/** A cluster run as the service holds it: `worker` names the member executing it now. */
export interface ClusterDaemonRun extends DaemonRun {
  readonly worker: WorkerRef | undefined;
}

export function remoteRun(
  latest: () => ClusterRun,
  result: Promise<SubagentResult>,
  control: (message: ControlMessage) => Promise<void>,
  rest: Pick<DaemonRun, 'dispose' | 'sendMessage' | 'resume'>,
): ClusterDaemonRun {
  return {
    id: latest().childId!,
    localAgent: undefined,
    result,
    get worker() {
      return latest().worker;
    },
    interrupt: (level: InterruptLevel) => void control({ op: 'interrupt', level }),
    ...rest,
  };
}
