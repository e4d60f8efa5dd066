/**
 * Nested delegation inside the pool: an in-process child (spawn, fork) gets the model-facing
 * `subagent` tool itself, per provider config (`delegation.<provider>`: which providers its tool
 * may use, and the tool's `maxDepth`), and delegates to grandchildren in the same daemon.
 *
 * - The tool is the one from `tool/`, mounted over a daemon-side service view: the calling child
 *   is the `parent`, its grandchildren are ordinary runs of the service, owned by the connection
 *   that owns the calling child's run, listed in `runs` with `parentRunId`.
 * - Depth counts from the root parent's lineage: a grandchild's depth is 1 + its parent child's
 *   recorded depth, and the cap is the smaller of the tool's `maxDepth` and the root start's
 *   `maxDepth`. Past it the start is refused (DEPTH_EXCEEDED) and the child reads an error result.
 * - Cancelling or disposing a run cancels what its child started (SubagentService.cancelDescendants),
 *   and a tool call's abort cancels the grandchild it waits for.
 * Nested tools run in the foreground only: a background job table would be shared across parents.
 */
import {
  SubagentError,
  type SessionEvent,
  type StartParams,
  type SubagentRun,
  type SubagentStartRequestBase,
  type WorktreeIsolationRequest,
} from '../../protocol/index.js';
import { createSubagentTool, type SubagentToolHandle } from '../../tool/index.js';
import type { AgentTool, ToolOutcome } from '../agent/tools/tool.js';
import { describeProvider } from '../provider.js';
import type { SubagentService } from './subagent-service.js';

/** The calling child, as the tool's `parent`. Lazy fields: the run id changes on resume. */
export interface NestedParent {
  readonly sessionId: string;
  readonly cwd: string;
  /** The child's own depth (its header's `delegationDepth`). */
  readonly depth: number;
  /** The root start's depth cap, inherited down the lineage. */
  readonly maxDepth?: number;
  runId(): string;
  events(): readonly SessionEvent[];
}

/** Per in-process provider: which providers its children's tool may start, and the tool's cap. */
export interface DelegationConfig {
  readonly providers: readonly string[];
  readonly maxDepth?: number;
}

export const DEFAULT_NESTED_MAX_DEPTH = 3;

type Request = SubagentStartRequestBase & WorktreeIsolationRequest & { readonly parent: NestedParent; readonly label?: string };

/** The daemon's service as the tool sees it: only the allowed providers, children as parents. */
export class DaemonServiceView {
  constructor(
    private readonly service: SubagentService,
    private readonly allowed: readonly string[],
  ) {}

  list(): string[] {
    return this.service.registry.list().filter((name) => this.allowed.includes(name));
  }

  getProvider(name: string): ReturnType<typeof describeProvider> | undefined {
    const provider = this.allowed.includes(name) ? this.service.registry.get(name) : undefined;
    return provider ? describeProvider(provider) : undefined;
  }

  on(event: 'subagent/provider-added' | 'subagent/provider-removed', listener: (payload: never) => void): () => void {
    return this.service.registry.onChange((change) => {
      const name = change.kind === 'added' ? change.provider.name : change.name;
      if (!this.allowed.includes(name)) return;
      const deliver = listener as (payload: unknown) => void;
      if (change.kind === 'added' && event === 'subagent/provider-added') deliver({ provider: describeProvider(change.provider) });
      if (change.kind === 'removed' && event === 'subagent/provider-removed') deliver({ name });
    });
  }

  async start(providerName: string, request: Request): Promise<SubagentRun> {
    const provider = this.getProvider(providerName);
    if (!provider) throw new SubagentError('NO_PROVIDER', `a nested subagent may not use provider "${providerName}" (allowed: ${this.allowed.join(', ')})`);
    const parent = request.parent;
    const parentRunId = parent.runId();
    const owner = this.service.delegatorOf(parentRunId);
    if (!owner) throw new SubagentError('RUN_STATE', `the calling child's run ${parentRunId} is not live`);
    const caps = [request.maxDepth, parent.maxDepth].filter((cap): cap is number => cap !== undefined);
    const params: StartParams = {
      provider: providerName,
      prompt: request.prompt,
      parent: {
        sessionId: parent.sessionId,
        cwd: parent.cwd,
        delegationDepth: parent.depth,
        ...(provider.inheritsParentContext && { events: completedTurns(parent.events()) }),
      },
      ...(caps.length > 0 && { maxDepth: Math.min(...caps) }),
      ...(request.agentOptions !== undefined && { agentOptions: request.agentOptions }),
      ...(request.toolFilter !== undefined && { toolFilter: request.toolFilter }),
      ...(request.persona !== undefined && { persona: request.persona }),
      ...(request.isolation !== undefined && { isolation: request.isolation }),
      ...(request.label !== undefined && { label: request.label }),
    };
    const started = await this.service.start(params, owner, request.signal, { parentRunId });
    const current = () => this.service.ownerOf(started.runId) ?? owner;
    // After readiness the tool call's signal is the grandchild's cancellation channel.
    const cancel = (): void => {
      // Already gone: nothing to cancel.
      this.service.cancel(started.runId, current()).catch(() => undefined);
    };
    if (request.signal.aborted) cancel();
    else request.signal.addEventListener('abort', cancel, { once: true });
    const result = this.service.wait(started.runId, owner);
    void result.finally(() => request.signal.removeEventListener('abort', cancel)).catch(() => undefined);
    return {
      id: started.runId,
      localAgent: undefined,
      result,
      dispose: () => this.service.dispose(started.runId, current()),
    };
  }
}

/** Builds, per in-process provider, the tools its children get; bound to the service once it exists. */
export class Delegation {
  private readonly handles = new Map<string, Array<SubagentToolHandle<NestedParent>>>();

  constructor(private readonly config: Readonly<Record<string, DelegationConfig>>) {}

  /** Mount the tools over the daemon's service (called once by createDaemon). */
  bind(service: SubagentService): void {
    for (const [owner, entry] of Object.entries(this.config)) {
      const view = new DaemonServiceView(service, entry.providers);
      const mounted = entry.providers.map((provider, i) =>
        createSubagentTool(view, {
          provider,
          toolName: i === 0 ? 'subagent' : `subagent_${provider.replace(/[^A-Za-z0-9_-]/g, '_')}`,
          maxDepth: entry.maxDepth ?? DEFAULT_NESTED_MAX_DEPTH,
          enableRunInBackground: false,
        }),
      );
      this.handles.set(owner, mounted);
    }
  }

  /** The delegation tools a new child of `provider` gets now (none when not configured). */
  toolsFor(provider: string, parent: NestedParent): AgentTool[] {
    const tools: AgentTool[] = [];
    for (const handle of this.handles.get(provider) ?? []) {
      const definition = handle.current();
      if (!definition) continue;
      tools.push({
        name: definition.name,
        description: definition.description,
        parameters: { ...definition.inputSchema },
        execute: (args, ctx): Promise<ToolOutcome> => definition.execute(args, { signal: ctx.signal, parent }),
      });
    }
    return tools;
  }
}

/** A child asks mid-turn: a fork grandchild inherits only its completed turns. */
function completedTurns(events: readonly SessionEvent[]): SessionEvent[] {
  for (let i = events.length - 1; i >= 0; i -= 1) if (events[i]?.type === 'turn/end') return events.slice(0, i + 1);
  return [];
}
