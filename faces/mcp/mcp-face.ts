/**
 * `subagentd mcp`: the pool as MCP tools, so any MCP host can delegate. Each provider becomes
 * one instance of the seam's model-facing tool (tool/: the first `subagent`, the others
 * `subagent_<name>`). Background mode `one-shot` (default): background calls are jobs of one
 * shared table, read and stopped with `job_output` / `job_kill`. Background mode `continuable`:
 * background calls (the default there) start durable children of this face's parent session,
 * driven with tool/'s `send_message` / `interrupt_agent` / `list_agents`; it needs a daemon that
 * offers children (else the face refuses to start, with the tool's reason). Settlement notices
 * ride on the next result (settlement-inbox.ts). What this face adds is MCP: bad arguments are
 * an `InvalidParams` error naming the field; a call's abort cancels its run; a call with a
 * `progressToken` gets `notifications/progress` while its child works. Imports client/,
 * protocol/ and tool/ only.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { metaTraceparent, type ParentRef, type RemoteChildren, type RemoteSubagentService, type RunEvent } from '../../client/index.js';
import { SubagentError, type ContinuableChildren } from '../../protocol/index.js';
import {
  BackgroundJobs,
  createChildControlTools,
  createSubagentTool,
  type BackgroundMode,
  type SubagentToolHandle,
  type ToolDefinition,
  type ToolService,
  type ToolStartRequest,
} from '../../tool/index.js';
import { DEFAULT_HEARTBEAT_MS, ProgressForwarder } from './progress.js';
import { SettlementInbox } from './settlement-inbox.js';
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
  /** Default `one-shot`; `continuable` needs the service's `children`. */
  readonly backgroundMode?: BackgroundMode;
  /** `worktree`: each child works in its own git worktree and branch of the host's repository. */
  readonly isolation?: 'none' | 'worktree';
}

/** How long closing waits for the cancels of the runs it abandons to be answered. */
const CLOSE_GRACE_MS = 700;

/** The calling agent as this face knows it: the host, plus where this call's progress goes. */
interface Caller {
  readonly ref: ParentRef;
  readonly onEvent?: (event: RunEvent) => void;
  /** The host's W3C trace context, from the call's `_meta.traceparent` (docs/observability.md). */
  readonly traceparent?: string;
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
      service.start(provider, {
        ...request,
        parent: request.parent.ref,
        ...(request.parent.onEvent && { onEvent: request.parent.onEvent }),
        ...(request.parent.traceparent !== undefined && { traceparent: request.parent.traceparent }),
      }),
    ...(service.children && { children: callerChildren(service.children) }),
  };
}

/** The client's children in the tool's terms: the caller acts as its parent reference. */
function callerChildren(children: RemoteChildren): ContinuableChildren<ToolStartRequest<Caller>, Caller> {
  return {
    start: (provider, request) =>
      children.start(provider, { ...request, parent: request.parent.ref, ...(request.parent.traceparent !== undefined && { traceparent: request.parent.traceparent }) }),
    sendMessage: (childId, message, from) => children.sendMessage(childId, message, from.ref, from.traceparent !== undefined ? { traceparent: from.traceparent } : {}),
    interrupt: (childId, by, level) => children.interrupt(childId, by.ref, level),
    list: (of, scope) => children.list(of.ref, scope),
    onSettled: (listener) => children.onSettled(listener),
  };
}

export function createMcpFace(options: McpFaceOptions): { readonly server: Server; close(): Promise<void> } {
  const { service } = options;
  const backgroundMode = options.backgroundMode ?? 'one-shot';
  const tools = toolService(service);
  const ref: ParentRef = { sessionId: `mcp-${process.pid}`, cwd: options.cwd };
  const jobs = new BackgroundJobs();
  const handles: SubagentToolHandle<Caller>[] = [...toolNames(options.providers)].map(([toolName, provider]) => {
    const info = service.getProvider(provider);
    if (!info) throw new SubagentError('NO_PROVIDER', `no provider named '${provider}' (available: ${service.list().join(', ')})`);
    const handle = createSubagentTool(
      tools,
      {
        provider,
        toolName,
        backgroundMode,
        // A provider that cannot cap depth is told nothing rather than refused.
        ...(!info.capabilities.depthLimit && { maxDepth: 'provider-managed' as const }),
        ...(options.model !== undefined && { agentOptions: { model: options.model } }),
        ...(options.isolation !== undefined && { isolation: options.isolation }),
      },
      { jobs },
    );
    const refusal = handle.refusal();
    if (refusal) throw refusal;
    return handle;
  });
  // Continuable mode mounted only with `children` (the tool refuses otherwise), so `tools.children` is there.
  const continuable = backgroundMode === 'continuable' && tools.children !== undefined;
  const inbox = new SettlementInbox(ref.sessionId);
  if (continuable) handles[0]?.onChildSettled(inbox.deliver);
  const extra: readonly ToolDefinition<Caller>[] = continuable ? createChildControlTools(tools.children!).all : (handles[0]?.jobTools() ?? []);
  const current = (): ToolDefinition<Caller>[] => [...handles.flatMap((h) => h.current() ?? []), ...extra];

  const inflight = new Set<Promise<unknown>>();
  const server = new Server({ name: 'subagentd', version: options.version }, { capabilities: { tools: {} } });

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
    const traceparent = metaTraceparent(request.params._meta);
    const execution = tool.execute(args, {
      signal: call.signal,
      parent: { ref, ...(progress && { onEvent: progress.onEvent }), ...(traceparent !== undefined && { traceparent }) },
    });
    inflight.add(execution);
    try {
      const result = await execution;
      return { content: [...result.content, ...inbox.take()], ...(result.isError && { isError: true }) };
    } finally {
      inflight.delete(execution);
      progress?.stop();
    }
  });

  return {
    server,
    async close() {
      // Closing the server aborts the calls in flight, and each cancels its run; background jobs
      // are killed. Waiting for the cancels to be answered is bounded: the host has left.
      await server.close();
      const settling = Promise.allSettled([...inflight, ...handles.map((h) => h.dispose())]);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([settling, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))]);
      clearTimeout(timer);
    },
  };
}
