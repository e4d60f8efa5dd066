/**
 * The client's public vocabulary: what a harness hands to `start`, what it gets back, and the
 * events it can observe. Seam types themselves live in protocol/seam.ts.
 */
import type {
  ClientToolDeclaration,
  ContentBlock,
  ParentRef,
  PermissionParams,
  PermissionResult,
  ProviderDescriptor,
  RunEvent,
  SubagentEndEvent,
  SubagentError,
  SubagentProvider,
  SubagentResult,
  SubagentRun,
  SubagentStartEvent,
  StartProgress,
  SubagentStartRequestBase,
  WorktreeIsolationRequest,
  ToolCallResult,
} from '../protocol/index.js';

/** Where the client reports what it cannot throw: dropped payloads, failed listeners, lost steering. */
export interface ClientLogger {
  error(message: string, error?: unknown): void;
  warn?(message: string, error?: unknown): void;
}

/** A tool the client hosts for one child; the daemon calls back with `tool/call` to run it. */
export interface ClientTool extends ClientToolDeclaration {
  execute(args: unknown, context: { readonly signal: AbortSignal }): Promise<ToolCallResult> | ToolCallResult;
}

/**
 * The parts of a harness agent the client reads. Depth fields are `unknown` on purpose: a
 * malformed value is passed through for the daemon to reject, never coerced.
 */
export interface HarnessAgentLike {
  readonly session: {
    readonly id: string;
    readonly header: { readonly cwd: string; readonly delegationDepth?: unknown };
    /** Seam-shaped events, or a real harness log (`{type, seq, data}`), translated on fork. */
    readonly events?: Iterable<unknown>;
    readonly log?: Iterable<unknown>;
  };
  readonly options?: { readonly subagentDepth?: unknown };
}

/** The `parent` of a client start request: a harness-shaped agent or a plain wire reference. */
export type ParentInput = HarnessAgentLike | ParentRef;

/** The seam's start request as a client process states it. */
export interface ClientStartRequest extends SubagentStartRequestBase, WorktreeIsolationRequest {
  readonly parent: ParentInput;
  readonly tools?: readonly ClientTool[];
  readonly env?: Readonly<Record<string, string>>;
  /** Streamed progress; when given the daemon is asked to `stream`. Exceptions are contained. */
  readonly onEvent?: (event: RunEvent) => void;
  /**
   * Where the start stands until `start` fulfils: queue position, starting, an ACP agent spawning
   * and initializing, ready. Daemon providers only (a local start does not wait). Exceptions are contained.
   */
  readonly onStartProgress?: (progress: StartProgress) => void;
  /** W3C `traceparent` the run's spans continue; default: the active OpenTelemetry span's, if any (client/trace-context.ts). */
  readonly traceparent?: string;
  /**
   * Makes the start safe to send again (≤ 128 chars): within 10 minutes, a start under the same
   * key and parent session answers the run the first one made. Default: a fresh key per start,
   * reused when the service reconnects and sends a start whose answer it never got.
   */
  readonly idempotencyKey?: string;
}

/**
 * A run whose child lives in the daemon. `id` is the daemon's run id. `sendMessage` / `resume`
 * exist exactly when the provider's descriptor advertises them. `sendMessage` returns nothing
 * (as in the seam): it sends `run/sendMessage` and reports a failure (unknown run, settled run,
 * lost daemon) to the connection's logger. `dispose` is memoised: one `run/dispose` on the wire.
 */
export interface RemoteSubagentRun extends SubagentRun<never> {
  readonly localAgent: undefined;
  /** The child's own id in the daemon (its session id for in-process providers); `id` is the run id. */
  readonly childId: string;
  /**
   * Secret proof of ownership: `run/attach` with it re-attaches the run from another connection
   * (after a reconnect or a daemon restart). Keep it out of logs.
   */
  readonly runToken: string;
  /** The daemon provider that runs the child. */
  readonly provider: string;
  /** Ask the daemon for the run's result (`run/wait`); for callers that lost the notification. */
  wait(): Promise<SubagentResult>;
  /**
   * The seam's `resume`; `signal` cancels the continuation (before readiness, and the run after);
   * `traceparent` as on a start (default: the active OpenTelemetry span's).
   */
  resume?(content: ContentBlock[], options?: ResumeOptions): Promise<RemoteSubagentRun>;
}

export interface ResumeOptions {
  readonly signal?: AbortSignal;
  readonly traceparent?: string;
}

/** A provider registered in this process; trusted, and started without a round trip. */
export type LocalSubagentProvider = SubagentProvider<ClientStartRequest>;

/** A daemon provider as the client presents it: the descriptor plus a `start` over the wire. */
export interface RemoteProvider extends ProviderDescriptor {
  start(request: ClientStartRequest): Promise<RemoteSubagentRun>;
}

/** What `getProvider` returns: a daemon provider, or the local provider object itself. */
export type ClientProvider = RemoteProvider | LocalSubagentProvider;

/** The seam's provider descriptor; `runtime` is known only for daemon providers. */
export interface ProviderInfo {
  readonly name: string;
  readonly capabilities: ProviderDescriptor['capabilities'];
  readonly inheritsParentContext: boolean;
  readonly runtime?: ProviderDescriptor['runtime'];
}

export interface ProviderAddedEvent {
  readonly provider: ProviderInfo;
  readonly origin: 'daemon' | 'local';
}

export interface ProviderRemovedEvent {
  readonly name: string;
  readonly origin: 'daemon' | 'local';
}

/** The connection to the daemon was lost (not by `close()`). */
export interface DisconnectedEvent {
  /** DAEMON_UNAVAILABLE, saying how the connection ended. */
  readonly error: SubagentError;
  /** Whether the service is reconnecting (`reconnect` was given): a `reconnected` event, or the runs' rejection, follows. */
  readonly reconnecting: boolean;
}

/** The service reconnected and re-attached its runs; calls work again. */
export interface ReconnectedEvent {
  /** The daemon's epoch now. */
  readonly epoch: string;
  /** Whether that is another daemon process than before the loss (its runs were interrupted). */
  readonly restarted: boolean;
  /** Re-dials it took (1-based). */
  readonly attempts: number;
}

/** The events `on` accepts, and their payloads. */
export interface ServiceEventMap {
  'subagent/start': SubagentStartEvent;
  'subagent/end': SubagentEndEvent;
  'subagent/provider-added': ProviderAddedEvent;
  'subagent/provider-removed': ProviderRemovedEvent;
  disconnected: DisconnectedEvent;
  reconnected: ReconnectedEvent;
}

export type ServiceEventName = keyof ServiceEventMap;

/** A listener may be async; a rejection is logged like a throw. */
export type ServiceListener<K extends ServiceEventName> = (payload: ServiceEventMap[K]) => void | Promise<void>;

/** Answers a child's permission prompt (ACP children ask through the daemon). */
export type PermissionHandler = (
  request: PermissionParams,
  context: { readonly signal: AbortSignal },
) => Promise<PermissionResult> | PermissionResult;
