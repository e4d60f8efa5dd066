/**
 * The shared in-process run driver behind `spawn` and `fork`: they differ only in the session
 * seed. `start` checks and prepares everything first (nothing exists if the request is bad),
 * publishes the child (its session file written and synced), and only then hands out the run.
 * A cancellation before that point rolls the child back and rejects with ABORTED.
 */
import { randomUUID } from '../../../common/node-builtins.js';
import { SubagentError, type SessionEvent, type SessionHeader } from '../../../protocol/index.js';
import type { DaemonProvider, ProviderStartRequest } from '../../provider.js';
import type { ChildAgent } from '../../agent/child-agent.js';
import { ModelError, type ResolvedModel } from '../../agent/model/model-adapter.js';
import { DEFAULT_PERSONA, interpolate, personaVariables } from '../../agent/persona.js';
import { isoTime } from '../../../common/iso-time.js';
import type { InProcessProviderOptions } from './in-process-options.js';
import type { InProcessRun, RunTracker } from './in-process-run.js';

/** The agent runtime, loaded at the first start or restore (see in-process-runtime.ts). */
let runtime: Promise<typeof import('./in-process-runtime.js')> | undefined;
const agentRuntime = (): Promise<typeof import('./in-process-runtime.js')> => (runtime ??= import('./in-process-runtime.js'));

export interface InProcessProvider extends DaemonProvider {
  start(request: ProviderStartRequest): Promise<InProcessRun>;
  /** Refuses new starts and resumptions, cancels every live run and waits for them. Idempotent. */
  dispose(): Promise<void>;
}

interface Flavour {
  readonly name: string;
  readonly inheritsParentContext: boolean;
  /** The child's seed from the request: none for spawn, the parent's completed turns for fork. */
  readonly seed: (request: ProviderStartRequest) => readonly SessionEvent[];
}

export function createInProcessProvider(flavour: Flavour, options: InProcessProviderOptions): InProcessProvider {
  checkOptions(options);
  const live = new Set<InProcessRun>();
  let disposing: Promise<void> | undefined;
  const tracker: RunTracker = {
    get closed() {
      return disposing !== undefined;
    },
    track(run) {
      live.add(run);
      run.result.finally(() => live.delete(run)).catch(() => undefined);
    },
  };

  return {
    name: flavour.name,
    capabilities: { outputSchema: true, depthLimit: true, toolFilter: true, persona: true },
    inheritsParentContext: flavour.inheritsParentContext,
    runtime: { sendMessage: true, resume: true },

    async start(request) {
      if (tracker.closed) throw new SubagentError('SHUTTING_DOWN', `provider "${flavour.name}" has been disposed`);
      const aborted = (): SubagentError => new SubagentError('ABORTED', 'start was cancelled before the child was ready');
      if (request.signal.aborted) throw aborted();
      const { ChildAgent, DEFAULT_MAX_STEPS, InProcessRun, prepareChild, reportTool } = await agentRuntime();

      const id = randomUUID();
      let child: ChildAgent | undefined;
      const report = request.report;
      const nested = [
        ...(report ? [reportTool((output, mode) => report(id, output, mode))] : []),
        ...(options.delegationTools?.(flavour.name, {
          sessionId: id,
          cwd: request.parent.cwd,
          depth: request.childDepth,
          ...(request.maxDepth !== undefined && { maxDepth: request.maxDepth }),
          runId: () => request.host.runId,
          events: () => child?.events ?? [],
        }) ?? []),
      ];
      const prepared = await prepareChild(flavour.name, request, options, flavour.seed(request), nested);
      const model = resolveModel(options, request.agentOptions?.model);
      const header: SessionHeader = {
        id,
        parentSession: request.parent.sessionId,
        cwd: request.parent.cwd,
        delegationDepth: request.childDepth,
        provider: flavour.name,
        model: model.model,
        createdAt: isoTime(),
      };
      if (request.signal.aborted) throw aborted();

      const log = options.log.child({ provider: flavour.name, sessionId: header.id });
      child = await ChildAgent.create({
        sessionsDir: options.sessionsDir,
        header,
        seed: prepared.seed,
        model,
        system: prepared.system,
        tools: prepared.tools,
        ...(prepared.structured && { structured: prepared.structured }),
        maxSteps: options.maxSteps ?? DEFAULT_MAX_STEPS,
        host: request.host,
        log,
      });
      if (request.signal.aborted || tracker.closed) {
        await child.discard();
        throw tracker.closed ? new SubagentError('SHUTTING_DOWN', `provider "${flavour.name}" has been disposed`) : aborted();
      }
      log.debug({ depth: header.delegationDepth, seed: child.seedLength }, 'child published');
      return new InProcessRun(child, request.prompt, request.signal, tracker);
    },

    async restore(childId, context) {
      if (tracker.closed) throw new SubagentError('SHUTTING_DOWN', `provider "${flavour.name}" has been disposed`);
      const { restoreChild, RestoredRun } = await agentRuntime();
      const child = await restoreChild(flavour.name, childId, context, options);
      return new RestoredRun(child, context.result, tracker);
    },

    dispose() {
      disposing ??= Promise.all([...live].map((run) => run.dispose())).then(() => undefined);
      return disposing;
    },
  };
}

function resolveModel(options: InProcessProviderOptions, name: string | undefined): ResolvedModel {
  try {
    return options.resolveModel(name);
  } catch (error) {
    if (error instanceof ModelError) throw new SubagentError('START_FAILED', error.message);
    throw error;
  }
}

/** Configuration mistakes fail when the provider is built, not at a child's first start. */
function checkOptions(options: InProcessProviderOptions): void {
  if (options.maxSteps !== undefined && !(Number.isSafeInteger(options.maxSteps) && options.maxSteps >= 1)) {
    throw new RangeError(`maxSteps must be a positive integer, got ${options.maxSteps}`);
  }
  const vars = personaVariables(options.personaVars ?? {}, { cwd: '/', provider: 'spawn', depth: 1 });
  try {
    interpolate(options.defaultPersona ?? DEFAULT_PERSONA, vars);
  } catch (error) {
    throw new Error(`the default persona is not a valid template: ${(error as Error).message}`);
  }
}
