/**
 * `subagentd mcp`: the pool as MCP tools, so any MCP host can delegate. Each provider becomes
 * one instance of the seam's model-facing tool (tool/: the first `subagent`, the others
 * `subagent_<name>`), sharing one background job table and its `job_output` / `job_kill`.
 * (Continuable children and their `send_message` / `interrupt_agent` / `list_agents` are not
 * offered yet: the client service has no `children` in main.) What this face adds is MCP: bad arguments are an `InvalidParams` error naming the
 * field; a call's abort cancels its run; a call with a `progressToken` gets
 * `notifications/progress` while its child works. Imports client/, protocol/ and tool/ only.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ParentRef, RemoteSubagentService, RunEvent } from '../../client/index.js';
import { SubagentError } from '../../protocol/index.js';
import { BackgroundJobs, createSubagentTool, type SubagentToolHandle, type ToolDefinition, type ToolService, type ToolStartRequest } from '../../tool/index.js';
import { DEFAULT_HEARTBEAT_MS, ProgressForwarder } from './progress.js';
import { checkToolInput } from './tool-input.js';

export interface McpFaceOptions {
  readonly service: RemoteSubagentService;
  /** Daemon providers to offer, in order; the first becomes `subagent`. */
  readonly providers: readonly string[];
  /** The children's model (`agentOptions.model`). */
  readonly model?: string;
  /** The working directory the children work in (the host's project). */
  readonly cwd: string;
  readonly version: string;
  readonly heartbeatMs?: number;
}

/** The calling agent as this face knows it: the host, plus where this call's progress goes. */
interface Caller {
  readonly ref: ParentRef;
  readonly onEvent?: (event: RunEvent) => void;
}

/** Tool name → provider; the first provider is the plain `subagent`. */
export function toolNames(providers: readonly string[]): Map<string, string> {
  return new Map(providers.map((provider, i) => [i === 0 ? 'subagent' : `subagent_${provider}`, provider]));
}

/** The client service in the tool's terms, with each call's progress sink riding on its caller. */
function toolService(service: RemoteSubagentService): ToolService<Caller> {
  return {
    list: () => service.list(),
    getProvider: (name) => service.getProvider(name),
    on: ((event: 'subagent/provider-added' | 'subagent/provider-removed', listener: (payload: never) => void) =>
      service.on(event, listener as never)) as ToolService<Caller>['on'],
    start: (provider, request: ToolStartRequest<Caller>) =>
      service.start(provider, { ...request, parent: request.parent.ref, ...(request.parent.onEvent && { onEvent: request.parent.onEvent }) }),
  };
}

export function createMcpFace(options: McpFaceOptions): { readonly server: Server; close(): Promise<void> } {
  const { service } = options;
  const tools = toolService(service);
  const jobs = new BackgroundJobs();
  const handles: SubagentToolHandle<Caller>[] = [...toolNames(options.providers)].map(([toolName, provider]) => {
    const info = service.getProvider(provider);
    if (!info) throw new SubagentError('NO_PROVIDER', `no provider named '${provider}' (available: ${service.list().join(', ')})`);
    const handle = createSubagentTool(
      tools,
      {
        provider,
        toolName,
        // A provider that cannot cap depth is told nothing rather than refused.
        ...(!info.capabilities.depthLimit && { maxDepth: 'provider-managed' as const }),
        ...(options.model !== undefined && { agentOptions: { model: options.model } }),
      },
      { jobs },
    );
    const refusal = handle.refusal();
    if (refusal) throw refusal;
    return handle;
  });
  const extra: ToolDefinition<Caller>[] = handles[0]?.jobTools() ?? [];
  const current = (): ToolDefinition<Caller>[] => [...handles.flatMap((h) => h.current() ?? []), ...extra];

  const server = new Server({ name: 'subagentd', version: options.version }, { capabilities: { tools: {} } });
  const ref: ParentRef = { sessionId: `mcp-${process.pid}`, cwd: options.cwd };

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: current().map((t): Tool => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as Tool['inputSchema'] })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, call): Promise<CallToolResult> => {
    const { name } = request.params;
    const tool = current().find((t) => t.name === name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}"`, { field: 'name' });
    const args = request.params.arguments ?? {};
    checkToolInput(name, tool.inputSchema, args);
    const token = call._meta?.progressToken;
    const progress =
      token === undefined
        ? undefined
        : new ProgressForwarder(
            (value, message) => call.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: value, message } }),
            options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
          );
    try {
      const result = await tool.execute(args, { signal: call.signal, parent: { ref, ...(progress && { onEvent: progress.onEvent }) } });
      return { content: result.content, ...(result.isError && { isError: true }) };
    } finally {
      progress?.stop();
    }
  });

  return {
    server,
    async close() {
      for (const handle of handles) await handle.dispose();
      await server.close();
    },
  };
}
