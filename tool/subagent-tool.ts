/**
 * `createSubagentTool(service, config)`: one model-facing tool bound to one provider.
 *
 * Mount lifecycle: the tool exists while its provider is registered (now or later), disappears
 * when it is removed, and re-derives its wording when it is registered again; other providers'
 * events are ignored. A provider that cannot honour the config (a numeric depth cap without
 * `depthLimit`, persona / toolFilter without the capability, continuable children the service or
 * provider cannot continue) leaves the tool unmounted, with the reason in `refusal()`.
 *
 * Execution: see run-outcome.ts (foreground), background-jobs.ts (one-shot jobs) and, for
 * continuable mode, the service's `children`. Calls never serialise: siblings run concurrently.
 */
import { SubagentError, type ChildSettledNotice, type ContentBlock } from '../protocol/index.js';
import { BackgroundJobs, JOB_KILL_TOOL, JOB_OUTPUT_TOOL } from './background-jobs.js';
import { resolveToolConfig, type ResolvedToolConfig, type SubagentToolConfig } from './config.js';
import { settleAndDispose, toToolResult } from './run-outcome.js';
import type { ToolProvider, ToolService, ToolStartRequest } from './service-shape.js';
import { messageOf, needsParent, textResult, type ToolCallContext, type ToolDefinition, type ToolResult } from './tool-definition.js';
import { settlementMessage } from './settlement-notice.js';
import { deriveWording } from './wording.js';

export interface SubagentToolOptions {
  /** A job table shared with other tool instances (one `job_output` / `job_kill` pair for all). */
  readonly jobs?: BackgroundJobs;
}

/** What a change listener is told: the definition now (undefined when unmounted) and why not. */
export interface SubagentToolChange<Parent> {
  readonly tool: ToolDefinition<Parent> | undefined;
  readonly refusal: SubagentError | undefined;
}

export interface SubagentToolHandle<Parent> {
  readonly name: string;
  /** The definition to offer the model now, or undefined while unmounted. */
  current(): ToolDefinition<Parent> | undefined;
  /** Why the tool is not mounted although its provider is registered. */
  refusal(): SubagentError | undefined;
  /** Called on every mount, unmount and change of wording. Returns an unsubscribe. */
  onChange(listener: (change: SubagentToolChange<Parent>) => void): () => void;
  /** The background job table (one-shot mode). */
  readonly jobs: BackgroundJobs;
  /** `job_output` and `job_kill` over `jobs`; offer them while background runs are enabled. */
  jobTools(): ToolDefinition[];
  /**
   * Continuable mode: the settlement notices of the service's children, each with the message to
   * put before the parent's next turn. Nothing is delivered when the service has no `children`.
   */
  onChildSettled(listener: (notice: ChildSettledNotice, message: ContentBlock[]) => void): () => void;
  /**
   * Unmount the tool for good (`current()` is undefined afterwards and a retained definition's
   * `execute` refuses), stop following the service, and kill unsettled background jobs.
   */
  dispose(): Promise<void>;
}

export function createSubagentTool<Parent>(
  service: ToolService<Parent>,
  config: SubagentToolConfig,
  options: SubagentToolOptions = {},
): SubagentToolHandle<Parent> {
  const settings = resolveToolConfig(config);
  const jobs = options.jobs ?? new BackgroundJobs();
  const listeners = new Set<(change: SubagentToolChange<Parent>) => void>();
  let tool: ToolDefinition<Parent> | undefined;
  let refused: SubagentError | undefined;
  let disposed = false;
  const mounted = (): boolean => !disposed;

  const remount = (): void => {
    const provider = disposed ? undefined : service.getProvider(settings.provider);
    refused = provider === undefined ? undefined : mountRefusal(service, provider, settings);
    tool = provider === undefined || refused !== undefined ? undefined : buildTool(service, provider, settings, jobs, mounted);
    const change = { tool, refusal: refused };
    for (const listener of listeners) {
      try {
        listener(change);
      } catch {
        // A harness listener's failure is its own; the mount state is already current.
      }
    }
  };
  const subscriptions = [
    service.on('subagent/provider-added', ({ provider }) => {
      if (provider.name === settings.provider) remount();
    }),
    service.on('subagent/provider-removed', ({ name }) => {
      if (name === settings.provider) remount();
    }),
  ];
  remount();

  return {
    name: settings.toolName,
    current: () => tool,
    refusal: () => refused,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    jobs,
    jobTools: () => jobs.tools(),
    onChildSettled(listener) {
      const subscription = service.children?.onSettled((notice) => listener(notice, settlementMessage(notice)));
      if (subscription) subscriptions.push(() => subscription.dispose());
      return () => subscription?.dispose();
    },
    async dispose() {
      if (!disposed) {
        // Unmounted for good: `current()` is undefined, and a definition a harness kept refuses.
        disposed = true;
        for (const unsubscribe of subscriptions.splice(0)) unsubscribe();
        remount();
        listeners.clear();
      }
      await jobs.killAll();
    },
  };
}

function mountRefusal(service: ToolService<unknown>, provider: ToolProvider, settings: ResolvedToolConfig): SubagentError | undefined {
  const { capabilities } = provider;
  const name = `provider '${provider.name}'`;
  if (settings.maxDepth !== undefined && !capabilities.depthLimit) {
    return new SubagentError(
      'UNSUPPORTED_CAPABILITY',
      `${name} cannot enforce a depth cap (no depthLimit): configure maxDepth: 'provider-managed' to send none`,
      { field: '/maxDepth' },
    );
  }
  if (settings.toolFilter !== undefined && !capabilities.toolFilter) {
    return new SubagentError('UNSUPPORTED_CAPABILITY', `${name} cannot apply a toolFilter`, { field: '/toolFilter' });
  }
  if (settings.persona !== undefined && !capabilities.persona) {
    return new SubagentError('UNSUPPORTED_CAPABILITY', `${name} cannot apply a persona`, { field: '/persona' });
  }
  if (settings.backgroundMode === 'continuable') {
    if (service.children === undefined) {
      return new SubagentError('UNSUPPORTED_CAPABILITY', "backgroundMode 'continuable' needs a service that can continue children (it has no children)", {
        field: '/backgroundMode',
      });
    }
    if (provider.runtime?.resume !== true) {
      return new SubagentError('UNSUPPORTED_CAPABILITY', `${name} cannot continue children (it cannot resume a child), so backgroundMode 'continuable' is refused`, {
        field: '/backgroundMode',
      });
    }
  }
  return undefined;
}

/** The wire's bound on a run label. */
const MAX_LABEL = 256;

interface ToolInput {
  readonly description: string;
  readonly prompt: string;
  readonly runInBackground?: boolean;
}

function parseInput(toolName: string, input: unknown): ToolInput | ToolResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return textResult(`${toolName} needs an object input`, true);
  const { description, prompt, run_in_background: background } = input as Record<string, unknown>;
  if (typeof description !== 'string' || description.trim() === '') return textResult(`${toolName} needs description, a short non-empty string`, true);
  if (description.length > MAX_LABEL) return textResult(`${toolName}: description is the run's label, 3-5 words (at most ${MAX_LABEL} characters)`, true);
  if (typeof prompt !== 'string' || prompt.trim() === '') return textResult(`${toolName} needs prompt, a non-empty string`, true);
  if (background !== undefined && typeof background !== 'boolean') return textResult(`${toolName}: run_in_background must be a boolean`, true);
  return { description, prompt, ...(background !== undefined && { runInBackground: background }) };
}

function buildTool<Parent>(
  service: ToolService<Parent>,
  provider: ToolProvider,
  settings: ResolvedToolConfig,
  jobs: BackgroundJobs,
  mounted: () => boolean,
): ToolDefinition<Parent> {
  const wording = deriveWording({
    inheritsParentContext: provider.inheritsParentContext,
    enableRunInBackground: settings.enableRunInBackground,
    backgroundMode: settings.backgroundMode,
    jobOutputTool: JOB_OUTPUT_TOOL,
    jobKillTool: JOB_KILL_TOOL,
    worktree: settings.isolation === 'worktree',
  });
  const name = settings.toolName;
  return {
    name,
    description: wording.description,
    inputSchema: wording.inputSchema,
    async execute(raw: unknown, context: ToolCallContext<Parent>): Promise<ToolResult> {
      if (!mounted()) return textResult(`${name} is no longer available: the tool was disposed`, true);
      const input = parseInput(name, raw);
      if ('isError' in input) return input;
      if (input.runInBackground === true && !settings.enableRunInBackground) {
        return textResult(`${name} cannot run in the background: background runs are disabled for this tool (enableRunInBackground: false)`, true);
      }
      if (context.signal?.aborted) return textResult(`${name}: tool call aborted before dispatch`, true);
      const { parent } = context;
      if (parent === undefined) return needsParent(name);
      const request = (signal: AbortSignal): ToolStartRequest<Parent> => buildRequest(settings, input, parent, signal);
      const background = input.runInBackground ?? settings.backgroundMode === 'continuable';
      if (!background) return runForeground(service, settings.provider, request(context.signal ?? new AbortController().signal));
      if (settings.backgroundMode === 'continuable') return startContinuable(service, settings.provider, request, input.description, context.signal);
      const jobId = jobs.launch(name, input.description, (signal) => service.start(settings.provider, request(signal)));
      return textResult(
        `started background job ${jobId} (${input.description}). Read its result with ${JOB_OUTPUT_TOOL} {"job_id": "${jobId}"} (add "wait": true to wait for it); stop it with ${JOB_KILL_TOOL}.`,
      );
    },
  };
}

/** The seam request: label and prompt from the model, everything else from config, verbatim. */
function buildRequest<Parent>(settings: ResolvedToolConfig, input: ToolInput, parent: Parent, signal: AbortSignal): ToolStartRequest<Parent> {
  const prompt: ContentBlock[] = [{ type: 'text', text: input.prompt }];
  return {
    label: input.description,
    prompt,
    parent,
    signal,
    ...(settings.agentOptions !== undefined && { agentOptions: { ...settings.agentOptions } }),
    ...(settings.persona !== undefined && { persona: settings.persona }),
    ...(settings.toolFilter !== undefined && { toolFilter: settings.toolFilter }),
    ...(settings.maxDepth !== undefined && { maxDepth: settings.maxDepth }),
    ...(settings.isolation !== undefined && { isolation: settings.isolation }),
  };
}

async function runForeground<Parent>(service: ToolService<Parent>, provider: string, request: ToolStartRequest<Parent>): Promise<ToolResult> {
  let run;
  try {
    run = await service.start(provider, request);
  } catch (error) {
    const code = error instanceof SubagentError ? ` (${error.code})` : '';
    if (request.signal.aborted) return textResult(`subagent run was cancelled before its child started${code}: ${messageOf(error)}`, true);
    return textResult(`subagent could not start${code}: ${messageOf(error)}`, true);
  }
  return toToolResult(await settleAndDispose(run));
}

async function startContinuable<Parent>(
  service: ToolService<Parent>,
  provider: string,
  request: (signal: AbortSignal) => ToolStartRequest<Parent>,
  label: string,
  callSignal: AbortSignal | undefined,
): Promise<ToolResult> {
  const children = service.children;
  if (children === undefined) return textResult('this service cannot continue children', true);
  // The call's signal cancels the start until the service accepts the child (an aborted call
  // creates no child); from then on the child outlives the call.
  const start = new AbortController();
  const follow = (): void => start.abort(callSignal?.reason);
  callSignal?.addEventListener('abort', follow, { once: true });
  try {
    const { childId } = await children.start(provider, request(start.signal));
    return textResult(
      `started subagent ${childId} (${label}) in the background. You get a message when it settles. ` +
        `send_message {"subagent_id": "${childId}", "message": …} gives it a later turn; interrupt_agent {"agent_id": "${childId}"} stops its current turn.`,
    );
  } catch (error) {
    const code = error instanceof SubagentError ? ` (${error.code})` : '';
    if (start.signal.aborted) return textResult(`subagent run was cancelled before its child started${code}: ${messageOf(error)}`, true);
    return textResult(`subagent could not start${code}: ${messageOf(error)}`, true);
  } finally {
    callSignal?.removeEventListener('abort', follow);
  }
}
