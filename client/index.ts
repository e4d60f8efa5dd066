/** The subagentd client: `SubagentService` over a daemon connection, plus the seam's vocabulary. */
export { connect } from './connect.js';
export type {
  CommonConnectOptions,
  ConnectOptions,
  SocketConnectOptions,
  SpawnConnectOptions,
  StreamConnectOptions,
} from './connect.js';
export { RemoteSubagentService } from './remote-service.js';
export { RemoteChildren } from './remote-children.js';
export type { ChildActor, ChildStartRequest } from './remote-children.js';
export { RunFaultError } from './run-record.js';
export { completedTurnPrefix, toParentRef } from './parent-ref.js';
export { defaultDaemonCliPath } from './package-paths.js';
export { metaTraceparent } from './trace-context.js';
export type {
  ClientLogger,
  ClientProvider,
  ClientStartRequest,
  ClientTool,
  DisconnectedEvent,
  HarnessAgentLike,
  LocalSubagentProvider,
  ParentInput,
  PermissionHandler,
  ProviderAddedEvent,
  ProviderInfo,
  ProviderRemovedEvent,
  ReconnectedEvent,
  RemoteProvider,
  RemoteSubagentRun,
  ServiceEventMap,
  ServiceEventName,
  ServiceListener,
} from './types.js';

export { SubagentError, SUBAGENT_ERROR_CODES, PROTOCOL_VERSION, isKnownStopReason, KNOWN_STOP_REASONS } from '../protocol/index.js';
export type {
  AgentOptions,
  ChildEntry,
  ChildListing,
  ChildReport,
  ChildSettledNotice,
  ChildStatus,
  ContinuableChildren,
  InterruptLevel,
  ClientToolDeclaration,
  ContentBlock,
  DaemonIdentity,
  ObjectJsonSchema,
  ParentRef,
  PermissionParams,
  PermissionResult,
  ProviderDescriptor,
  RetryEvent,
  RunEvent,
  SessionEvent,
  StartProgress,
  SubagentCapabilities,
  SubagentEndEvent,
  SubagentErrorCode,
  SubagentProvider,
  SubagentResult,
  SubagentRun,
  SubagentStartEvent,
  SubagentStartRequestBase,
  SubagentStopReason,
  ToolCallResult,
  ToolFilter,
  Usage,
} from '../protocol/index.js';
export { DaemonOps } from './daemon-ops.js';
export type { ReconnectOptions } from './reconnect.js';
export { ensureDaemon, type AutoStartOptions } from './auto-start.js';
export { defaultSocketPath } from '../common/socket-path.js';

// The model-facing subagent tool and the child-control tools (also `subagentd/tool`).
export { BackgroundJobs, createChildControlTools, createSubagentTool, settlementMessage } from '../tool/index.js';
export type {
  ChildControlTools,
  JobSnapshot,
  SubagentToolConfig,
  SubagentToolHandle,
  ToolCallContext,
  ToolDefinition,
  ToolResult,
  ToolService,
} from '../tool/index.js';
export { stopDaemon, type StopDaemonOptions, type StopOutcome } from './stop-daemon.js';
export { DaemonStartError } from './auto-start.js';
