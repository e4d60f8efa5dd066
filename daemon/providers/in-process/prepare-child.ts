/**
 * Everything a start request decides about a child, worked out before anything is created: the
 * seed, the tools (workspace, client-hosted, structured capture) behind the tool filter, and the
 * system prompt. Every problem with the request is an INVALID_REQUEST naming its field.
 */
import { SubagentError, type SessionEvent } from '../../../protocol/index.js';
import type { ProviderStartRequest } from '../../provider.js';
import { seedProblem } from '../../agent/fork-seed.js';
import { DEFAULT_PERSONA, interpolate, personaVariables, TemplateError } from '../../agent/persona.js';
import { clientTools } from '../../agent/tools/client-tools.js';
import { STRUCTURED_OUTPUT_INSTRUCTION, STRUCTURED_OUTPUT_TOOL, StructuredCapture } from '../../agent/tools/structured-output.js';
import type { AgentTool } from '../../agent/tools/tool.js';
import { compileToolFilter, UnknownToolNameError } from '../../agent/tools/tool-filter.js';
import { ToolRegistry, ToolSchemaError } from '../../agent/tools/tool-registry.js';
import { Workspace } from '../../workspace/workspace.js';
import { BUILTIN_TOOL_NAMES, workspaceTools } from '../../agent/tools/workspace-tools.js';
import type { InProcessProviderOptions } from './in-process-options.js';

export interface PreparedChild {
  /** Borrowed from the request; the session log copies it. */
  readonly seed: readonly SessionEvent[];
  readonly tools: ToolRegistry;
  readonly structured?: StructuredCapture;
  readonly system: string;
}

export async function prepareChild(
  providerName: string,
  request: ProviderStartRequest,
  options: InProcessProviderOptions,
  seed: readonly SessionEvent[],
  /** Daemon-provided tools (nested delegation's `subagent`); filterable like the built-ins. */
  extraTools: readonly AgentTool[] = [],
): Promise<PreparedChild> {
  const problem = seedProblem(seed);
  if (problem !== undefined) {
    throw new SubagentError('INVALID_REQUEST', `parent.events is not a balanced completed-turn prefix: ${problem}`, {
      field: '/parent/events',
    });
  }
  const system = systemPrompt(providerName, request, options);
  const root = await Workspace.open(request.parent.cwd).catch((error: unknown) => {
    throw new SubagentError('INVALID_REQUEST', `parent.cwd cannot be used as the workspace: ${(error as Error).message}`, {
      field: '/parent/cwd',
    });
  });

  const declared = request.tools ?? [];
  const reserved = new Set<string>([...BUILTIN_TOOL_NAMES, STRUCTURED_OUTPUT_TOOL, ...extraTools.map((tool) => tool.name)]);
  declared.forEach((tool, i) => {
    if (reserved.has(tool.name)) {
      throw new SubagentError('INVALID_REQUEST', `client tool "${tool.name}" clashes with a built-in tool`, { field: `/tools/${i}/name` });
    }
  });

  const structured = request.outputSchema ? new StructuredCapture(request.outputSchema) : undefined;
  const filter = request.toolFilter;
  if (structured && filter && 'deny' in filter && filter.deny.includes(STRUCTURED_OUTPUT_TOOL)) {
    throw new SubagentError('INVALID_REQUEST', `toolFilter cannot deny ${STRUCTURED_OUTPUT_TOOL}: the output schema needs it`, {
      field: '/toolFilter',
    });
  }
  let visible: (name: string) => boolean;
  try {
    const known = [
      ...BUILTIN_TOOL_NAMES,
      ...extraTools.map((tool) => tool.name),
      ...declared.map((tool) => tool.name),
      ...(structured ? [STRUCTURED_OUTPUT_TOOL] : []),
    ];
    visible = compileToolFilter(filter, known);
  } catch (error) {
    if (error instanceof UnknownToolNameError) throw new SubagentError('INVALID_REQUEST', error.message, { field: '/toolFilter' });
    throw error;
  }

  const host = request.host;
  const tools: AgentTool[] = [
    ...workspaceTools(root, options.policy, request.env ?? {}),
    ...extraTools,
    ...clientTools(declared, host),
    ...(structured ? [structured.tool()] : []),
  ];
  let registry: ToolRegistry;
  try {
    registry = new ToolRegistry(tools, {
      visible,
      ...(structured && { alwaysVisible: [STRUCTURED_OUTPUT_TOOL], refusal: () => structured.refusal() }),
    });
  } catch (error) {
    if (!(error instanceof ToolSchemaError)) throw error;
    const index = declared.findIndex((tool) => tool.name === error.toolName);
    const field = error.toolName === STRUCTURED_OUTPUT_TOOL ? '/outputSchema' : index >= 0 ? `/tools/${index}/inputSchema` : '/tools';
    throw new SubagentError('INVALID_REQUEST', error.message, { field });
  }
  return { seed, tools: registry, ...(structured && { structured }), system };
}

function systemPrompt(providerName: string, request: ProviderStartRequest, options: InProcessProviderOptions): string {
  const vars = personaVariables(options.personaVars ?? {}, {
    cwd: request.parent.cwd,
    provider: providerName,
    depth: request.childDepth,
  });
  let persona: string;
  try {
    persona = interpolate(request.persona ?? options.defaultPersona ?? DEFAULT_PERSONA, vars);
  } catch (error) {
    if (!(error instanceof TemplateError) || request.persona === undefined) throw error;
    throw new SubagentError('INVALID_REQUEST', `persona: ${error.message}`, { field: '/persona' });
  }
  return request.outputSchema ? `${persona}\n\n${STRUCTURED_OUTPUT_INSTRUCTION}` : persona;
}
