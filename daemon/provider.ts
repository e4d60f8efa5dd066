/**
 * The provider seam as the daemon hosts it. A daemon provider is the seam's `SubagentProvider`
 * whose start request carries a parent *reference* (the parent agent lives in another process)
 * and a `host`: the owning connection's services (client-hosted tools, permission prompts,
 * streamed progress).
 */
import type { RunBudget } from './upstream/token-budgets.js';
import type { Logger } from 'pino';
import type {
  AgentProcessesStatus,
  ContentBlock,
  InterruptLevel,
  SubagentResult,
  SubagentRun,
  ToolFilter,
  ClientToolDeclaration,
  ParentRef,
  PermissionParams,
  PermissionResult,
  ProviderDescriptor,
  RunEvent,
  StartProgress,
  SubagentProvider,
  SubagentStartRequestBase,
  ToolCallResult,
  WorkerRef,
  WorktreeIsolationRequest,
} from '../protocol/index.js';

/** What a running child may ask of the client that owns it. */
export interface RunHost {
  /** The run id the service minted for this start (stable before and after readiness). */
  readonly runId: string;
  /** Run a tool the client declared in its start request. Rejects if the owner is gone. */
  callTool(call: { callId: string; name: string; arguments: unknown }, signal: AbortSignal): Promise<ToolCallResult>;
  /** Ask the owning client to choose a permission option. */
  askPermission(request: Omit<PermissionParams, 'runId'>, signal: AbortSignal): Promise<PermissionResult>;
  /** Stream progress; dropped unless the client asked for `stream`. Never throws. */
  emit(event: RunEvent): void;
  readonly log: Logger;
  /**
   * The most output bytes the service passes on for one run (protocol/output-cap.ts): a provider
   * need not hold more than this of a reply. Absent means DEFAULT_MAX_OUTPUT_BYTES.
   */
  readonly maxOutputBytes?: number;
  /**
   * Whether the run's caller may steer it in the very turn its start (or resume) returns: an
   * in-process caller may, so an in-process child takes its first step a macrotask later. False
   * for the daemon's runs, whose callers are across a wire. Absent means it may.
   */
  readonly steersInTurn?: boolean;
  /**
   * Whose model requests the run makes, for its endpoint's fair order and budgets
   * (daemon/upstream/): the client that owns the lineage, and the lineage's root run.
   * Absent: the run is anonymous to the endpoint's governor.
   */
  readonly requester?: Requester | undefined;
  /** The run's token budget (daemon/upstream/token-budgets.ts); absent when no budget is set. */
  readonly tokenBudget?: RunBudget | undefined;
}

/** A run's client (its owning connection) and lineage (its root run's id). */
export interface Requester {
  readonly client: string;
  readonly lineage: string;
}

export interface ProviderStartRequest extends SubagentStartRequestBase {
  readonly parent: ParentRef;
  /** Child depth, derived by the service from the parent reference (1 + the parent's depth). */
  readonly childDepth: number;
  readonly tools?: readonly ClientToolDeclaration[];
  /** Allow-listed environment for the child's tools; the daemon's own env is never inherited. */
  readonly env?: Readonly<Record<string, string>>;
  readonly host: RunHost;
  /** A continuable child's `report` tool delivers here (by the child's own id); absent otherwise. */
  readonly report?: (childId: string, output: string, mode: 'quiet' | 'next-step') => void;
  /** The start's progress for its client (the ACP provider tells spawning, initializing); absent when nobody asked. */
  readonly progress?: (value: StartProgress) => void;
  /**
   * Worktree isolation as asked (daemon/worktrees/): handled by the provider wrapper that the
   * daemon puts around every provider, which hands the inner provider a request whose
   * `parent.cwd` is inside the worktree and no `isolation` field.
   */
  readonly isolation?: IsolationRequest;
  /**
   * The caller's W3C trace context (protocol: `traceparent`). Providers ignore it; a cluster start
   * carries it in its run record, so the member that executes the run continues the trace.
   */
  readonly traceparent?: string;
  /**
   * A nested start: the run whose child delegates, and waits on this one in the foreground.
   * Providers ignore it; a cluster runs the child on that run's execution slot (daemon/cluster/lent-slots.ts).
   */
  readonly parentRunId?: string;
}

export type IsolationRequest = WorktreeIsolationRequest;

export interface DaemonResumeOptions {
  readonly signal?: AbortSignal;
  /** The resume's caller's W3C trace context: a cluster continuation carries it to the member that executes it. */
  readonly traceparent?: string;
}

/**
 * A run as the daemon holds it: the seam's run, whose `resume` also takes the continuation's own
 * cancellation signal (the start's signal is spent once a run was cancelled), and whose
 * `sendMessage` may confirm delivery asynchronously.
 */
export interface DaemonRun extends Omit<SubagentRun, 'resume' | 'sendMessage'> {
  resume?(content: ContentBlock[], options?: DaemonResumeOptions): Promise<DaemonRun>;
  /** As the seam's; a run executing elsewhere (cluster) confirms delivery when its promise settles. */
  sendMessage?(content: ContentBlock[]): void | Promise<void>;
  /** Optional: stop at a step boundary (`after-step`); without it every interrupt is `now`. */
  interrupt?(level: InterruptLevel): void;
  /** The daemon executing the child, when that is not this one (a cluster member); read at each look, it may move. */
  readonly worker?: WorkerRef | undefined;
}

/** What a later daemon knows of a child it did not run: from the run index. */
export interface RestoreContext {
  readonly host: RunHost;
  /** The run's recorded outcome. */
  readonly result: SubagentResult;
  readonly persona?: string;
  readonly toolFilter?: ToolFilter;
  /** The start's depth cap, which binds the child's own nested delegation. */
  readonly maxDepth?: number;
  /** A continuable child's `report` sink: the restored child gets its `report` tool back. */
  readonly report?: ProviderStartRequest['report'];
}

/** A provider the daemon can host. `runtime` advertises which optional run methods exist. */
export interface DaemonProvider extends Omit<SubagentProvider<ProviderStartRequest>, 'start'> {
  readonly runtime: ProviderDescriptor['runtime'];
  start(request: ProviderStartRequest): Promise<DaemonRun>;
  /**
   * Optional: bring back a settled child a previous daemon ran (by its child id), so `resume`
   * works across restarts. Its presence is the capability.
   */
  restore?(childId: string, context: RestoreContext): Promise<DaemonRun>;
  /** Optional: the provider's external agent processes (ACP: warm and in use), for status. */
  processes?(): AgentProcessesStatus;
  /**
   * Optional: release what the provider holds outside its runs (ACP: warm processes). Called when
   * the provider is unregistered by a reload and when the daemon stops; runs keep going.
   */
  close?(): Promise<void>;
}

export function describeProvider(provider: DaemonProvider): ProviderDescriptor {
  return {
    name: provider.name,
    capabilities: { ...provider.capabilities },
    inheritsParentContext: provider.inheritsParentContext,
    runtime: { ...provider.runtime },
  };
}
