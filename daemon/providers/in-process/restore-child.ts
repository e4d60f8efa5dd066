/**
 * Bringing back a child that a previous daemon ran, from its session log, so its owner can
 * resume it after a restart. What the log does not hold cannot come back: client-hosted tools
 * (their executors lived in the old connection), the request's env, and a structured-output
 * demand; the tool filter and persona come from the run index. A log cut mid-turn (the daemon
 * died) is closed with `turn/end interrupted` first, so the history stays balanced.
 */
import { SubagentError } from '../../../protocol/index.js';
import type { RestoreContext } from '../../provider.js';
import { DEFAULT_MAX_STEPS } from '../../agent/agent-loop.js';
import { ChildAgent } from '../../agent/child-agent.js';
import { ModelError } from '../../agent/model/model-adapter.js';
import { DEFAULT_PERSONA, interpolate, personaVariables } from '../../agent/persona.js';
import { SessionLog } from '../../store/session-log.js';
import { sessionFilePath } from '../../ops/paths.js';
import { readSessionFile } from '../../store/session-reader.js';
import { compileToolFilter } from '../../agent/tools/tool-filter.js';
import { ToolRegistry } from '../../agent/tools/tool-registry.js';
import { Workspace } from '../../workspace/workspace.js';
import { BUILTIN_TOOL_NAMES, workspaceTools } from '../../agent/tools/workspace-tools.js';
import type { InProcessProviderOptions } from './in-process-options.js';
import { reportTool } from '../../agent/tools/report-tool.js';
import type { AgentTool } from '../../agent/tools/tool.js';

export async function restoreChild(provider: string, childId: string, context: RestoreContext, options: InProcessProviderOptions): Promise<ChildAgent> {
  const file = sessionFilePath(options.sessionsDir, childId);
  const loaded = await readSessionFile(file).catch((error: unknown) => {
    throw new SubagentError('RUN_STATE', `the session log of child ${childId} cannot be read (${(error as Error).message}); it may have passed retention`);
  });
  const { header, events } = loaded;
  if (header.provider !== provider) {
    throw new SubagentError('RUN_STATE', `child ${childId} was run by provider "${header.provider}", not "${provider}"`);
  }
  const session = SessionLog.reopen(file, header, events);
  if (events.at(-1)?.type !== 'turn/end') {
    session.append({ type: 'turn/end', reason: 'interrupted', diagnostic: 'the daemon stopped during this turn' });
    await session.close();
  }
  const root = await Workspace.open(header.cwd).catch((error: unknown) => {
    throw new SubagentError('RUN_STATE', `the child's workspace ${header.cwd} is gone: ${(error as Error).message}`);
  });
  const listed = context.toolFilter ? ('allow' in context.toolFilter ? context.toolFilter.allow : context.toolFilter.deny) : [];
  // The daemon's own tools come back as they were given at start: report, nested delegation.
  let child: ChildAgent | undefined;
  const report = context.report;
  const extra: AgentTool[] = [
    ...(report ? [reportTool((output, mode) => report(childId, output, mode))] : []),
    ...(options.delegationTools?.(provider, {
      sessionId: header.id,
      cwd: header.cwd,
      depth: header.delegationDepth,
      ...(context.maxDepth !== undefined && { maxDepth: context.maxDepth }),
      runId: () => context.host.runId,
      events: () => child?.events ?? [],
    }) ?? []),
  ];
  const tools = new ToolRegistry([...workspaceTools(root, options.policy, {}), ...extra], {
    visible: compileToolFilter(context.toolFilter, [...BUILTIN_TOOL_NAMES, ...extra.map((tool) => tool.name), ...listed]),
  });
  const vars = personaVariables(options.personaVars ?? {}, { cwd: header.cwd, provider, depth: header.delegationDepth });
  let model;
  try {
    model = options.resolveModel(header.model);
  } catch (error) {
    if (error instanceof ModelError) throw new SubagentError('RUN_STATE', `cannot restore child ${childId}: ${error.message}`);
    throw error;
  }
  child = ChildAgent.restore(
    {
      sessionsDir: options.sessionsDir,
      header,
      seed: [],
      model,
      system: interpolate(context.persona ?? options.defaultPersona ?? DEFAULT_PERSONA, vars),
      tools,
      maxSteps: options.maxSteps ?? DEFAULT_MAX_STEPS,
      host: context.host,
      log: options.log.child({ provider, sessionId: header.id, restored: true }),
    },
    session,
  );
  return child;
}
