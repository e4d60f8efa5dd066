/**
 * Requests the daemon makes of this client: run a tool the client declared for a run, or
 * answer a child's permission prompt. Params are validated by the channel before we see them.
 */
import type { CancellationToken } from 'vscode-jsonrpc/node';
import {
  PermissionRequest,
  SubagentError,
  ToolCallRequest,
  type PermissionResult,
} from '../protocol/index.js';
import type { RpcChannel } from './rpc-channel.js';
import type { RunTable } from './run-table.js';
import type { ClientLogger, PermissionHandler } from './types.js';

const CANCELLED: PermissionResult = { outcome: 'cancelled' };

export function serveDaemonRequests(
  channel: RpcChannel,
  runs: RunTable,
  logger: ClientLogger,
  onPermission: PermissionHandler | undefined,
): void {
  channel.onRequest(ToolCallRequest, async (params, token) => {
    const record = await runs.lookup(params.runId);
    if (!record) throw new SubagentError('UNKNOWN_RUN', `no live run ${params.runId} on this connection`);
    const tool = record.tools.get(params.name);
    if (!tool) {
      throw new SubagentError('INVALID_REQUEST', `run ${params.runId} declared no tool named '${params.name}'`, {
        field: '/name',
      });
    }
    return record.callTool(tool, params.arguments, token);
  });

  channel.onRequest(PermissionRequest, async (params, token) => {
    // Without a handler nothing is granted: the seam fails closed.
    if (!onPermission) return CANCELLED;
    const controller = abortOn(token);
    try {
      const answer = await onPermission(params, { signal: controller.signal });
      const failure = PermissionRequest.checkResult(answer);
      if (!failure) return answer;
      logger.error(`the permission handler gave an invalid answer for run ${params.runId}: ${failure.message}`);
    } catch (error) {
      logger.error(`the permission handler failed for run ${params.runId}`, error);
    }
    return CANCELLED;
  });
}

function abortOn(token: CancellationToken): AbortController {
  const controller = new AbortController();
  if (token.isCancellationRequested) controller.abort();
  else token.onCancellationRequested(() => controller.abort());
  return controller;
}
