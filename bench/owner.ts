/** A trivial in-process RunOwner (the service's view of a connection) and RunHost for providers. */
import { pino } from 'pino';
import type { RunEvent, SubagentStartEvent, EndParams } from '../protocol/index.js';
import type { RunHost } from '../daemon/provider.js';
import type { RunOwner } from '../daemon/service/subagent-service.js';

export const silentLog = pino({ level: 'silent' });

export function benchOwner(id: string, onEvent?: (event: RunEvent) => void): RunOwner {
  return {
    id,
    open: true,
    notifyStart: (_event: SubagentStartEvent) => undefined,
    notifyEnd: (_event: EndParams) => undefined,
    notifyRunEvent: ({ event }) => onEvent?.(event),
    callTool: () => Promise.reject(new Error('the bench owner hosts no tools')),
    askPermission: async () => ({ outcome: 'cancelled' }),
  };
}

export function benchHost(runId = 'bench-run'): RunHost {
  return {
    runId,
    log: silentLog,
    callTool: () => Promise.reject(new Error('the bench host hosts no tools')),
    askPermission: async () => ({ outcome: 'cancelled' }),
    emit: () => undefined,
  };
}
