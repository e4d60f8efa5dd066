/**
 * Every message of the wire, declared once. Both sides import these; payloads that cross the
 * socket are validated against the schemas in `schemas.ts` on arrival.
 */
import { NotificationType, RequestType } from 'vscode-jsonrpc';
import type { SubagentErrorData } from './errors.js';
import type {
  AgentOptions,
  ChildListing,
  ChildReport,
  ChildSettledNotice,
  ContentBlock,
  InterruptLevel,
  ObjectJsonSchema,
  SessionEvent,
  SessionHeader,
  SubagentCapabilities,
  SubagentEndEvent,
  SubagentResult,
  SubagentStartEvent,
  SubagentStopReason,
  ToolFilter,
  Usage,
} from './seam.js';

/** Semver of the wire. A different major is refused at `initialize`. */
export const PROTOCOL_VERSION = '1.1.0';

/** Default cap on one inbound frame's body; the header block has its own 8 KiB cap. */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Shared payloads

/** What a client learns about a provider: the seam's descriptor plus its runtime capabilities. */
export interface ProviderDescriptor {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  readonly inheritsParentContext: boolean;
  /** Runtime capabilities: the run handle has `sendMessage` / `resume` exactly when true. */
  readonly runtime: { readonly sendMessage: boolean; readonly resume: boolean };
}

/** The parent agent, as a reference: what the daemon needs of it across the process boundary. */
export interface ParentRef {
  readonly sessionId: string;
  /** Absolute working directory of the parent session; the child works there. */
  readonly cwd: string;
  /** The parent's stored `SessionHeader.delegationDepth`. */
  readonly delegationDepth?: number;
  /** The parent's runtime `AgentOptions.subagentDepth`. */
  readonly subagentDepth?: number;
  /** For `fork`: the parent's session events (a balanced completed-turn prefix). */
  readonly events?: SessionEvent[];
}

/** A tool hosted by the client: the daemon calls back with `tool/call` to run it. */
export interface ClientToolDeclaration {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments (object-rooted). */
  readonly inputSchema: Record<string, unknown>;
}

export interface DaemonIdentity {
  readonly name: 'subagentd';
  readonly version: string;
  readonly pid: number;
  readonly startedAt: string;
  /** Random per daemon process: a reconnecting client compares it to detect a restart. */
  readonly epoch: string;
}

// ---------------------------------------------------------------------------------------------
// Requests, client → daemon

/**
 * Our own clients send `protocolVersion` and `clientInfo`. An LSP-style client (vscode-languageclient
 * and the like) sends its usual `processId`, `rootUri`, `capabilities`, … instead, and puts what
 * is ours in `initializationOptions`; `capabilities` marks such a client, for which a missing
 * protocol version means this one.
 */
export interface InitializeParams {
  readonly protocolVersion?: string;
  readonly clientInfo?: { readonly name: string; readonly version?: string };
  /** The daemon's token (from the 0600 file beside the socket), when the daemon requires one. */
  readonly token?: string;
  readonly processId?: number | null;
  readonly rootUri?: string | null;
  readonly rootPath?: string | null;
  readonly capabilities?: Record<string, unknown>;
  readonly initializationOptions?: { readonly protocolVersion?: string; readonly token?: string; readonly [k: string]: unknown };
  readonly [lspField: string]: unknown;
}
export interface InitializeResult {
  readonly protocolVersion: string;
  readonly daemon: DaemonIdentity;
  readonly providers: ProviderDescriptor[];
  /** Answered to LSP-style clients only: the daemon offers no language features. */
  readonly capabilities?: Record<string, never>;
  /** Optional daemon features; absent keys mean unsupported (older daemons send none). */
  readonly features?: DaemonFeatures;
}
export interface DaemonFeatures {
  /** The `child/*` methods and the `child/settled` notification. */
  readonly continuableChildren?: boolean;
}
export const InitializeRequest = new RequestType<InitializeParams, InitializeResult, SubagentErrorData>('initialize');
/** LSP's end of a session, for LSP-style clients: `shutdown` is answered (the daemon stays up), `exit` closes the connection. */
export const LspShutdownRequest = new RequestType<Record<string, never> | undefined, null, SubagentErrorData>('shutdown');
export const LspExitNotification = new NotificationType<Record<string, never> | undefined>('exit');
export const LspInitializedNotification = new NotificationType<Record<string, never> | undefined>('initialized');

export type ProvidersListParams = Record<string, never>;
export interface ProvidersListResult {
  readonly providers: ProviderDescriptor[];
}
export const ProvidersListRequest = new RequestType<ProvidersListParams, ProvidersListResult, SubagentErrorData>(
  'providers/list',
);

export interface StartParams {
  readonly provider: string;
  /** A short display label (the tool's `description`). */
  readonly label?: string;
  readonly prompt: ContentBlock[];
  readonly parent: ParentRef;
  readonly agentOptions?: AgentOptions;
  readonly outputSchema?: ObjectJsonSchema;
  readonly maxDepth?: number;
  readonly toolFilter?: ToolFilter;
  readonly persona?: string;
  /** Tools the client hosts for this child. */
  readonly tools?: ClientToolDeclaration[];
  /** Environment for the child's tools: the daemon's own env is never passed. */
  readonly env?: Record<string, string>;
  /** Ask for streamed `run/event` notifications. */
  readonly stream?: boolean;
  /** Ask for `$/progress` notifications with this token until the start is answered (since 1.1). */
  readonly progressToken?: ProgressToken;
}
export interface StartResult extends SubagentStartEvent {
  /**
   * Secret proof of ownership, known only to the starter: `run/attach` with it re-attaches the
   * run from another connection (after a reconnect, or after the daemon restarted).
   */
  readonly runToken: string;
}
export const StartRequest = new RequestType<StartParams, StartResult, SubagentErrorData>('subagent/start');

export interface RunParams {
  readonly runId: string;
}
export type EmptyResult = Record<string, never>;
export interface CancelParams extends RunParams {
  /** `now` (the default) stops at once; `after-step` lets the current model step and its tool calls finish. */
  readonly level?: InterruptLevel;
}
export const CancelRequest = new RequestType<CancelParams, EmptyResult, SubagentErrorData>('run/cancel');
export const DisposeRequest = new RequestType<RunParams, EmptyResult, SubagentErrorData>('run/dispose');
export const WaitRequest = new RequestType<RunParams, SubagentResult, SubagentErrorData>('run/wait');

export interface SendMessageParams extends RunParams {
  readonly content: ContentBlock[];
}
export const SendMessageRequest = new RequestType<SendMessageParams, EmptyResult, SubagentErrorData>('run/sendMessage');

export interface ResumeParams extends RunParams {
  readonly prompt: ContentBlock[];
  readonly stream?: boolean;
}
export const ResumeRequest = new RequestType<ResumeParams, StartResult, SubagentErrorData>('run/resume');

export type RunState = 'starting' | 'running' | 'settled' | 'disposed';

export interface RunInfo {
  readonly runId: string;
  readonly id: string;
  readonly provider: string;
  readonly state: RunState;
  readonly stopReason?: SubagentStopReason;
  readonly startedAt: string;
  readonly settledAt?: string;
  /** Whether the asking connection owns the run. */
  readonly mine: boolean;
  /** Nested delegation: the run whose child started this one. */
  readonly parentRunId?: string;
  readonly usage?: Usage;
  /** The settled result's diagnostic (why it failed, what was refused), as stored. */
  readonly diagnostic?: string;
}

/** Filters and paging of `runs/list`. Runs come newest first; without `limit`, all of them. */
export interface RunsListParams {
  readonly state?: RunState;
  readonly provider?: string;
  /** Only the asking connection's runs (true) or only others' (false). */
  readonly mine?: boolean;
  /** Only runs started at or after this ISO-8601 time. */
  readonly since?: string;
  readonly limit?: number;
  /** `nextCursor` of the previous page. */
  readonly cursor?: string;
}
export interface RunsListResult {
  readonly runs: RunInfo[];
  /** Present when more runs match: pass it as `cursor` for the next page. */
  readonly nextCursor?: string;
}
export const RunsListRequest = new RequestType<RunsListParams, RunsListResult, SubagentErrorData>('runs/list');

export interface AttachParams extends RunParams {
  readonly runToken: string;
  /**
   * Stream this run's `run/event`s to the attaching connection. A child continued by a new daemon
   * after a drain does not know whether its owner streamed, so the owner says so again here.
   * Absent: the run keeps what it had.
   */
  readonly stream?: boolean;
}
export interface AttachResult {
  readonly run: RunInfo;
  /** Present once the run has settled. */
  readonly result?: SubagentResult;
}
export const AttachRequest = new RequestType<AttachParams, AttachResult, SubagentErrorData>('run/attach');

export interface InspectResult {
  readonly run: RunInfo;
  /** Present for the owner of a run whose provider keeps a session log. */
  readonly header?: SessionHeader;
  readonly events?: SessionEvent[];
}
export interface InspectParams extends RunParams {
  /** Proves ownership from another connection: the session's contents are shown only to the owner. */
  readonly runToken?: string;
}
export const InspectRequest = new RequestType<InspectParams, InspectResult, SubagentErrorData>('run/inspect');

/**
 * One ACP provider's agent processes, as status shows them. Warm processes are spawned and
 * `initialize`d ahead of starts; they take no admission slot but count toward `maxProcesses`.
 */
export interface AgentProcessesStatus {
  /** Warm processes the config asks for. */
  readonly warm: number;
  /** Warm: `initialize` answered, waiting for a start. */
  readonly ready: number;
  /** Warm: spawned, `initialize` not answered yet. */
  readonly warming: number;
  /** Serving a run chain (taken warm or spawned cold). */
  readonly inUse: number;
  readonly maxProcesses?: number;
  /** Starts that took a ready process, and starts that spawned their own. */
  readonly warmStarts: number;
  readonly coldStarts: number;
  /** Ready processes stopped after idling past `warmIdleMs`. */
  readonly reaped: number;
  /** Used processes given back to the pool (`reuseProcesses`). */
  readonly reused: number;
  /** Why the last warm-up failed, until one succeeds. */
  readonly lastError?: string;
}

/** The config file and environment a daemon run by the CLI has in force, as status shows them (no secrets). */
export interface SettingsStatus {
  readonly path?: string;
  /** The daemon's environment file (KEY=VALUE), read at start and on reload. */
  readonly envFile: string;
  readonly envFileLoaded: boolean;
  readonly loadedAt: string;
  /** Bumped by every successful reload. */
  readonly generation: number;
  /** Bumped by every reload tried; `reloadError` says why the last one failed (the old settings stayed). */
  readonly reloadAttempts: number;
  readonly reloadError?: string;
  readonly model: { readonly default?: string; readonly endpoint?: string; readonly model?: string; readonly apiKey: 'set' | 'unset'; readonly problem?: string };
  /** Changed settings that only a restart applies. */
  readonly restartNeeded: string[];
  /** Each configured ACP provider's agent processes, by provider name. */
  readonly agents?: Record<string, AgentProcessesStatus>;
}

export interface StatusResult {
  readonly daemon: DaemonIdentity;
  readonly protocolVersion: string;
  readonly uptimeMs: number;
  readonly socket?: string;
  readonly stateDir: string;
  readonly connections: number;
  readonly runs: Record<RunState, number>;
  readonly providers: string[];
  readonly shuttingDown: boolean;
  /** The shared concurrency budget: live runs, queued starts, and each connection's share. */
  readonly admission: {
    readonly running: number;
    readonly queued: number;
    readonly limits: { readonly maxConcurrentRuns: number; readonly maxRunsPerConnection: number; readonly maxQueued: number };
    readonly byConnection: Record<string, { readonly running: number; readonly queued: number; readonly client?: string }>;
  };
  readonly memory: { readonly rss: number; readonly heapUsed: number };
  /** The config file and environment in force (no secrets); absent for an embedded daemon. */
  readonly config?: SettingsStatus;
  /**
   * Present while the state dir cannot be written (full or read-only disk): the daemon still
   * answers, but refuses runs it cannot record. `reason` names each file and its errno.
   */
  readonly degraded?: {
    readonly reason: string;
    readonly faults: ReadonlyArray<{ readonly path: string; readonly code: string; readonly since: string }>;
  };
}
export const StatusRequest = new RequestType<Record<string, never>, StatusResult, SubagentErrorData>('daemon/status');

export interface ShutdownParams {
  /** Refuse new starts and wait for running children before exiting. */
  readonly drain?: boolean;
  /** How long a drain may wait before cancelling what still runs. */
  readonly timeoutMs?: number;
}
export const ShutdownRequest = new RequestType<ShutdownParams, EmptyResult, SubagentErrorData>('daemon/shutdown');

/** What `daemon/gc` did: retention applied now (the daemon also applies it at start and daily). */
export interface GcResult {
  /** Settled and disposed runs moved out of memory into the on-disk archive. */
  readonly runsArchived: number;
  /** Stored runs removed past the age or count limit. */
  readonly runsRemoved: number;
  /** Session logs removed past the age or count limit. */
  readonly sessionsRemoved: number;
  /** Runs stored after the pass (archived records, a run changed since counted twice). */
  readonly runsStored: number;
}
export const GcRequest = new RequestType<Record<string, never>, GcResult, SubagentErrorData>('daemon/gc');

// ---------------------------------------------------------------------------------------------
// Continuable children, client → daemon. Every call names the caller's owner key: a secret the
// client chose, whose hash the daemon keeps in the child's durable record. Children belong to
// (owner key, parent session); other keys get NOT_OWNER.

export interface ChildOwnerParams {
  /** The client's secret owner key (at least 16 characters); keep it out of logs. */
  readonly ownerKey: string;
}
export interface ChildStartParams extends ChildOwnerParams {
  readonly provider: string;
  /** The first message. */
  readonly prompt: ContentBlock[];
  readonly parent: ParentRef;
  /** A short display name, shown by `child/list` and in the settlement notice. */
  readonly label?: string;
  readonly agentOptions?: AgentOptions;
  readonly maxDepth?: number;
  readonly toolFilter?: ToolFilter;
  readonly persona?: string;
  readonly env?: Record<string, string>;
}
export interface ChildMessageResult {
  readonly childId: string;
  readonly messageId: string;
}
export const ChildStartRequest = new RequestType<ChildStartParams, ChildMessageResult, SubagentErrorData>('child/start');

export interface ChildSendParams extends ChildOwnerParams {
  readonly childId: string;
  /** The sender's session id: it must be the child's direct parent. */
  readonly from: string;
  readonly message: ContentBlock[];
}
export const ChildSendRequest = new RequestType<ChildSendParams, ChildMessageResult, SubagentErrorData>('child/send');

export interface ChildInterruptParams extends ChildOwnerParams {
  readonly childId: string;
  /** The interrupter's session id: the child's parent or an ancestor. */
  readonly by: string;
  readonly level?: InterruptLevel;
}
export const ChildInterruptRequest = new RequestType<ChildInterruptParams, EmptyResult, SubagentErrorData>('child/interrupt');

export interface ChildListParams extends ChildOwnerParams {
  /** Whose children: a parent session id (a client's agent, or a child's own id). */
  readonly of: string;
  readonly scope?: 'children' | 'descendants';
}
export const ChildListRequest = new RequestType<ChildListParams, ChildListing, SubagentErrorData>('child/list');

export interface ChildAttachResult {
  /** Settlement notices that waited for this owner and were sent now, as `child/settled`. */
  readonly delivered: number;
}
export const ChildAttachRequest = new RequestType<ChildOwnerParams, ChildAttachResult, SubagentErrorData>('child/attach');

// ---------------------------------------------------------------------------------------------
// Notifications, daemon → client

export interface ProviderAddedParams {
  readonly provider: ProviderDescriptor;
}
export const ProviderAddedNotification = new NotificationType<ProviderAddedParams>('subagent/provider-added');

export interface ProviderRemovedParams {
  readonly name: string;
}
export const ProviderRemovedNotification = new NotificationType<ProviderRemovedParams>('subagent/provider-removed');

export const StartNotification = new NotificationType<SubagentStartEvent>('subagent/start');

export interface EndParams extends SubagentEndEvent {
  /** The run's result; absent when the run failed with an infrastructure fault (see `error`). */
  readonly result?: SubagentResult;
  readonly error?: { readonly message: string };
}
export const EndNotification = new NotificationType<EndParams>('subagent/end');

/**
 * The model call failed in a way worth retrying (HTTP 429/5xx, connection refused) and will be
 * tried again after `delayMs`: the server's `Retry-After` when it gave one, else backoff.
 */
export interface RetryEvent {
  readonly kind: 'retry';
  /** The attempt about to be made after the delay; the first request is attempt 1. */
  readonly attempt: number;
  readonly delayMs: number;
  /** What failed, e.g. `HTTP 429: Rate limit reached` or `cannot reach …`. */
  readonly reason: string;
  /** The HTTP status, when the server answered. */
  readonly status?: number;
}

/** Streamed progress of a run, sent only when the start asked for `stream`. */
export type RunEvent =
  | { readonly kind: 'text-delta'; readonly text: string }
  | { readonly kind: 'reasoning-delta'; readonly text: string }
  | { readonly kind: 'session'; readonly event: SessionEvent }
  | RetryEvent;
export interface RunEventParams {
  readonly runId: string;
  readonly event: RunEvent;
}
export const RunEventNotification = new NotificationType<RunEventParams>('run/event');

/** LSP's progress token: chosen by the client, unique among its unanswered starts. */
export type ProgressToken = string | number;

/**
 * Where a start stands before its answer, sent only for a start that gave a `progressToken`:
 * - `queued`: waiting for a run slot; `position` 1 is next (re-sent as the queue moves);
 * - `starting`: admitted, the provider is starting the child;
 * - `agent`: an ACP provider is spawning its agent process, then initializing it;
 * - `ready`: published as `runId`; the answer follows.
 */
export type StartProgress =
  | { readonly kind: 'queued'; readonly position: number }
  | { readonly kind: 'starting' }
  | { readonly kind: 'agent'; readonly stage: 'spawning' | 'initializing' }
  | { readonly kind: 'ready'; readonly runId: string };
export interface StartProgressParams {
  readonly token: ProgressToken;
  readonly value: StartProgress;
}
/** LSP's `$/progress`, carrying a start's progress (the only progress the daemon reports this way). */
export const StartProgressNotification = new NotificationType<StartProgressParams>('$/progress');

/** A continuable child's turn settled with nothing left in its inbox; sent to its owner's connections. */
export interface ChildSettledParams extends ChildSettledNotice {
  /** The parent session the child belongs to. */
  readonly parentId: string;
}
export const ChildSettledNotification = new NotificationType<ChildSettledParams>('child/settled');

/** A continuable child used its `report` tool; sent to its owner's connections (not kept). */
export interface ChildReportParams extends ChildReport {
  readonly parentId: string;
}
export const ChildReportNotification = new NotificationType<ChildReportParams>('child/report');

// ---------------------------------------------------------------------------------------------
// Requests, daemon → client

export interface ToolCallParams {
  readonly runId: string;
  readonly callId: string;
  readonly name: string;
  readonly arguments: unknown;
}
export interface ToolCallResult {
  readonly content: ContentBlock[];
  readonly isError?: boolean;
}
export const ToolCallRequest = new RequestType<ToolCallParams, ToolCallResult, SubagentErrorData>('tool/call');

export interface PermissionOption {
  readonly optionId: string;
  readonly name: string;
  readonly kind: 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';
}
export interface PermissionParams {
  readonly runId: string;
  /** What the child wants to do, as its agent described it. */
  readonly title: string;
  readonly options: PermissionOption[];
}
export type PermissionResult = { readonly outcome: 'selected'; readonly optionId: string } | { readonly outcome: 'cancelled' };
export const PermissionRequest = new RequestType<PermissionParams, PermissionResult, SubagentErrorData>(
  'permission/request',
);
