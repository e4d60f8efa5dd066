/**
 * Every message of the wire, declared once: method name, params schema, result schema. Each
 * declaration is the vscode-jsonrpc type both sides pass to the library, and the types below are
 * derived from it (`ParamsOf`, `ResultOf`), never written beside it. `WIRE` lists them by
 * direction; test/protocol-declarations.spec.ts checks docs/protocol.md against it.
 *
 * Adding a method: declare it here and add it to `WIRE`, document it in docs/protocol.md, serve it
 * in daemon/connection/client-connection.ts, call it from the client.
 *
 * Over 400 lines on purpose: this is the wire's one catalogue (about 30 messages, each with its
 * field comments), in the order of docs/protocol.md; split up, it would no longer be the one
 * place to read a message whole.
 */
import {
  anyObject,
  anyValue,
  arr,
  bool,
  count,
  discriminated,
  empty,
  int,
  intFrom,
  integer,
  literal,
  nonEmpty,
  nullValue,
  num,
  obj,
  oneOf,
  oneOfValues,
  orNull,
  record,
  str,
  stringOrInteger,
  splitOn,
  type Infer,
} from './json-schema.js';
import { MAX_TEXT_BYTES } from './output-cap.js';
import {
  agentOptions,
  childEnv,
  childId,
  childListing,
  content,
  daemonIdentity,
  interruptLevel,
  isolationFields,
  outputSchema,
  ownerKey,
  parentRef,
  persona,
  progressToken,
  providerDescriptor,
  result,
  runId,
  runInfo,
  runState,
  sessionEvent,
  sessionHeader,
  startEvent,
  startEventProperties,
  traceparent,
  stopReason,
  toolFilter,
  toolName,
  usage,
  workerRef,
} from './schemas.js';
import { defineNotification, defineRequest, type ParamsOf, type ResultOf } from './wire-message.js';

export { type DaemonIdentity, type Isolation, type WorktreeCleanup, type ParentRef, type ProgressToken, type ProviderDescriptor, type RunInfo, type RunState, type WorkerRef } from './schemas.js';

/** Semver of the wire. A different major is refused at `initialize`. */
export const PROTOCOL_VERSION = '1.7.0';

/** Default cap on one inbound frame's body; the header block has its own 8 KiB cap. */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

export type EmptyResult = Record<string, never>;

// ---------------------------------------------------------------------------------------------
// Handshake, client → daemon

/**
 * Our own clients send `protocolVersion` and `clientInfo`. An LSP-style client (vscode-languageclient
 * and the like) sends its usual `processId`, `rootUri`, `capabilities`, … instead, and puts what
 * is ours in `initializationOptions`; `capabilities` marks such a client, for which a missing
 * protocol version means this one. Whichever is missing is judged by the connection (it names
 * the field), not by the schema.
 */
export const InitializeRequest = defineRequest(
  'initialize',
  obj({
    protocolVersion: nonEmpty(64),
    clientInfo: obj({ name: nonEmpty(256), version: str(64) }, ['name']),
    /** The daemon's token (from the 0600 file beside the socket), when the daemon requires one. */
    token: str(1024),
    processId: orNull(integer),
    rootUri: orNull(str(4096)),
    rootPath: orNull(str(4096)),
    capabilities: anyObject,
    initializationOptions: obj({ protocolVersion: nonEmpty(64), token: str(1024) }, [], true),
    locale: str(64),
    trace: str(64),
    workspaceFolders: orNull(arr(anyValue, 1024)),
    workDoneToken: stringOrInteger(),
  }),
  // Open: a newer daemon may answer more.
  obj(
    {
      protocolVersion: nonEmpty(64),
      daemon: daemonIdentity,
      providers: arr(providerDescriptor, 1024),
      /** Answered to LSP-style clients only: the daemon offers no language features. */
      capabilities: empty,
      /** Optional daemon features; absent keys mean unsupported (older daemons send none). */
      features: obj(
        {
          /** The `child/*` methods and the `child/settled` notification. */
          continuableChildren: bool,
        },
        [],
        true,
      ),
    },
    ['protocolVersion', 'daemon', 'providers'],
    true,
  ),
);
export type InitializeParams = ParamsOf<typeof InitializeRequest>;
export type InitializeResult = ResultOf<typeof InitializeRequest>;
export type DaemonFeatures = NonNullable<InitializeResult['features']>;

/** LSP's end of a session, for LSP-style clients: `shutdown` is answered (the daemon stays up), `exit` closes the connection. */
export const LspShutdownRequest = defineRequest('shutdown', empty, nullValue);
export const LspExitNotification = defineNotification('exit', anyValue);
export const LspInitializedNotification = defineNotification('initialized', anyValue);

// ---------------------------------------------------------------------------------------------
// Runs, client → daemon

export const ProvidersListRequest = defineRequest('providers/list', empty, obj({ providers: arr(providerDescriptor, 1024) }, ['providers'], true));
export type ProvidersListParams = ParamsOf<typeof ProvidersListRequest>;
export type ProvidersListResult = ResultOf<typeof ProvidersListRequest>;

/** A tool hosted by the client: the daemon calls back with `tool/call` to run it. */
const clientTool = obj(
  {
    name: toolName,
    description: str(16 * 1024),
    /** JSON Schema of the arguments (object-rooted). */
    inputSchema: anyObject,
  },
  ['name', 'description', 'inputSchema'],
);
export type ClientToolDeclaration = Infer<typeof clientTool>;

/** What a start answers: the start event, and the run token. */
const startResult = obj(
  {
    ...startEventProperties,
    /**
     * Secret proof of ownership, known only to the starter: `run/attach` with it re-attaches the
     * run from another connection (after a reconnect, or after the daemon restarted).
     */
    runToken: nonEmpty(256),
  },
  ['runId', 'provider', 'id', 'local', 'runToken'],
);

export const StartRequest = defineRequest(
  'subagent/start',
  obj(
    {
      provider: nonEmpty(128),
      /** A short display label (the tool's `description`). */
      label: str(256),
      prompt: content,
      parent: parentRef,
      agentOptions,
      outputSchema,
      maxDepth: num,
      toolFilter,
      persona,
      /** Tools the client hosts for this child. */
      tools: arr(clientTool, 128),
      /** Environment for the child's tools: the daemon's own env is never passed. */
      env: childEnv,
      /** Ask for streamed `run/event` notifications. */
      stream: bool,
      /** Ask for `$/progress` notifications with this token until the start is answered (since 1.1). */
      progressToken,
      /** Worktree isolation (since 1.4): `isolation`, `baseRef`, `includeUncommitted`, `cleanup`. */
      ...isolationFields,
      /** The caller's W3C trace context: the run's spans continue its trace (since 1.4). */
      traceparent,
      /**
       * Since 1.4: makes a retried start safe. A start whose key its parent session
       * (`parent.sessionId`) used in the last `limits.idempotencyWindowMs` (10 minutes) answers
       * that start's run, attached to this connection, instead of starting another.
       */
      idempotencyKey: nonEmpty(128),
    },
    ['provider', 'prompt', 'parent'],
  ),
  startResult,
);
export type StartParams = ParamsOf<typeof StartRequest>;
export type StartResult = ResultOf<typeof StartRequest>;

const runParams = obj({ runId }, ['runId']);
export type RunParams = Infer<typeof runParams>;

export const CancelRequest = defineRequest(
  'run/cancel',
  obj(
    {
      runId,
      /** `now` (the default) stops at once; `after-step` lets the current model step and its tool calls finish. */
      level: interruptLevel,
    },
    ['runId'],
  ),
  empty,
);
export type CancelParams = ParamsOf<typeof CancelRequest>;
export const DisposeRequest = defineRequest('run/dispose', runParams, empty);
export const WaitRequest = defineRequest('run/wait', runParams, result);

export const SendMessageRequest = defineRequest('run/sendMessage', obj({ runId, content }, ['runId', 'content']), empty);
export type SendMessageParams = ParamsOf<typeof SendMessageRequest>;

export const ResumeRequest = defineRequest(
  'run/resume',
  obj(
    {
      runId,
      prompt: content,
      stream: bool,
      /** The caller's W3C trace context: the continuation's spans continue its trace (since 1.7). */
      traceparent,
    },
    ['runId', 'prompt'],
  ),
  startResult,
);
export type ResumeParams = ParamsOf<typeof ResumeRequest>;

/** Filters and paging of `runs/list`. Runs come newest first; without `limit`, all of them. */
export const RunsListRequest = defineRequest(
  'runs/list',
  obj({
    state: runState,
    provider: nonEmpty(128),
    /** Only the asking connection's runs (true) or only others' (false). */
    mine: bool,
    /** Only runs started at or after this ISO-8601 time. */
    since: str(64),
    limit: int(1, 100_000),
    /** `nextCursor` of the previous page. */
    cursor: nonEmpty(256),
  }),
  obj(
    {
      runs: arr(runInfo, 1_000_000),
      /** Present when more runs match: pass it as `cursor` for the next page. */
      nextCursor: nonEmpty(256),
    },
    ['runs'],
    true,
  ),
);
export type RunsListParams = ParamsOf<typeof RunsListRequest>;
export type RunsListResult = ResultOf<typeof RunsListRequest>;

export const AttachRequest = defineRequest(
  'run/attach',
  obj(
    {
      runId,
      runToken: nonEmpty(256),
      /**
       * Stream this run's `run/event`s to the attaching connection. A child continued by a new daemon
       * after a drain does not know whether its owner streamed, so the owner says so again here.
       * Absent: the run keeps what it had.
       */
      stream: bool,
    },
    ['runId', 'runToken'],
  ),
  obj(
    {
      run: runInfo,
      /** Present once the run has settled. */
      result,
    },
    ['run'],
  ),
);
export type AttachParams = ParamsOf<typeof AttachRequest>;
export type AttachResult = ResultOf<typeof AttachRequest>;

export const InspectRequest = defineRequest(
  'run/inspect',
  obj(
    {
      runId,
      /** Proves ownership from another connection: the session's contents are shown only to the owner. */
      runToken: nonEmpty(256),
    },
    ['runId'],
  ),
  obj(
    {
      run: runInfo,
      /** Present for the owner of a run whose provider keeps a session log. */
      header: sessionHeader,
      events: arr(sessionEvent, 1_000_000),
    },
    ['run'],
  ),
);
export type InspectParams = ParamsOf<typeof InspectRequest>;
export type InspectResult = ResultOf<typeof InspectRequest>;

// ---------------------------------------------------------------------------------------------
// The daemon, client → daemon

/** An error message the daemon reports as is (an agent's or a config parser's): bounded only loosely. */
const DIAGNOSTIC_TEXT = 64 * 1024;

/** A number the daemon reports; not an integer check (a limit may be configured fractional). */
const figure = num;

/**
 * One ACP provider's agent processes, as status shows them. Warm processes are spawned and
 * `initialize`d ahead of starts; they take no admission slot but count toward `maxProcesses`.
 */
const agentProcessesStatus = obj(
  {
    /** Warm processes the config asks for. */
    warm: count,
    /** Warm: `initialize` answered, waiting for a start. */
    ready: count,
    /** Warm: spawned, `initialize` not answered yet. */
    warming: count,
    /** Serving a run chain (taken warm or spawned cold). */
    inUse: count,
    maxProcesses: count,
    /** Starts that took a ready process. */
    warmStarts: count,
    /** Starts that spawned their own. */
    coldStarts: count,
    /** Ready processes stopped after idling past `warmIdleMs`. */
    reaped: count,
    /** Used processes given back to the pool (`reuseProcesses`). */
    reused: count,
    /** Why the last warm-up failed, until one succeeds. */
    lastError: str(DIAGNOSTIC_TEXT),
  },
  ['warm', 'ready', 'warming', 'inUse', 'warmStarts', 'coldStarts', 'reaped', 'reused'],
  true,
);
export type AgentProcessesStatus = Infer<typeof agentProcessesStatus>;

/** The config file and environment a daemon run by the CLI has in force, as status shows them (no secrets). */
const settingsStatus = obj(
  {
    path: str(),
    /** The daemon's environment file (KEY=VALUE), read at start and on reload. */
    envFile: str(),
    envFileLoaded: bool,
    loadedAt: str(64),
    /** Bumped by every successful reload. */
    generation: count,
    /** Bumped by every reload tried; `reloadError` says why the last one failed (the old settings stayed). */
    reloadAttempts: count,
    reloadError: str(DIAGNOSTIC_TEXT),
    model: obj(
      { default: str(), endpoint: str(), model: str(), apiKey: oneOfValues(['set', 'unset']), problem: str(DIAGNOSTIC_TEXT) },
      ['apiKey'],
      true,
    ),
    /** Changed settings that only a restart applies. */
    restartNeeded: arr(str(256), 1024),
    /** Each configured ACP provider's agent processes, by provider name. */
    agents: record(agentProcessesStatus),
  },
  ['envFile', 'envFileLoaded', 'loadedAt', 'generation', 'reloadAttempts', 'model', 'restartNeeded'],
  true,
);
export type SettingsStatus = Infer<typeof settingsStatus>;

/** One model endpoint as its governor sees it: named by base URL, never by key. */
const endpointStatus = obj(
  {
    endpoint: str(2048),
    /** The concurrency limit in force: adaptive, never above `maxConcurrent`. */
    limit: count,
    inFlight: count,
    waiting: count,
    /** 429 and 503 answers in the last minute. */
    throttledLastMinute: count,
    tokensPerMinute: count,
    requestsPerMinute: count,
    /** A `Retry-After` pause in force until this time. */
    pausedUntil: str(64),
    maxConcurrent: count,
    requestsPerMinuteLimit: count,
    tokensPerMinuteLimit: count,
  },
  ['endpoint', 'limit', 'inFlight', 'waiting', 'throttledLastMinute', 'tokensPerMinute', 'requestsPerMinute'],
  true,
);
export type EndpointStatusInfo = Infer<typeof endpointStatus>;

const share = obj({ running: count, queued: count, client: str(1024) }, ['running', 'queued'], true);

export const StatusRequest = defineRequest(
  'daemon/status',
  empty,
  // Open at every level: a newer daemon may report more.
  obj(
    {
      daemon: daemonIdentity,
      protocolVersion: nonEmpty(64),
      uptimeMs: count,
      socket: str(),
      stateDir: str(),
      connections: count,
      runs: obj({ starting: count, running: count, settled: count, disposed: count }, ['starting', 'running', 'settled', 'disposed'], true),
      providers: arr(nonEmpty(128), 1024),
      shuttingDown: bool,
      /**
       * The shared concurrency budget: live runs, queued starts, and each connection's share. How
       * slots are held: `roots` (runs on a slot of the budget, = `running`), `descendants` (nested
       * runs on the slot their waiting parent lent them), `descendantsWaiting` (nested starts
       * waiting for their parent's slot); see docs/security.md, "Admission of lineages".
       */
      admission: obj(
        {
          running: count,
          queued: count,
          roots: count,
          descendants: count,
          descendantsWaiting: count,
          /**
           * A cluster member's execution slots (docs/cluster.md, "Lineages"): `slots` (`cluster.slots`),
           * runs executing here on a ticket of their own (`held`), nested runs on the slot their
           * waiting parent lent them (`lent`, not counted against `slots` or the cap).
           */
          execution: obj({ slots: count, held: count, lent: count }, ['slots', 'held', 'lent'], true),
          limits: obj(
            { maxConcurrentRuns: figure, maxRunsPerConnection: figure, maxQueued: figure },
            ['maxConcurrentRuns', 'maxRunsPerConnection', 'maxQueued'],
            true,
          ),
          byConnection: record(share),
        },
        ['running', 'queued', 'limits', 'byConnection'],
        true,
      ),
      memory: obj({ rss: figure, heapUsed: figure }, ['rss', 'heapUsed'], true),
      /** This daemon as run info's `worker` names it; a cluster member's lists the workspaces it serves. */
      worker: workerRef,
      /** The event loop's polling after client traffic (daemon/connection/poll-spin.ts); absent when it is off. */
      pollSpin: obj(
        { windowMicros: count, windows: count, caught: count, spunMs: figure },
        ['windowMicros', 'windows', 'caught', 'spunMs'],
        true,
      ),
      /** The config file and environment in force (no secrets); absent for an embedded daemon. */
      config: settingsStatus,
      /** How `run_shell` runs: in the bubblewrap sandbox, or unsandboxed by `tools.shellUnsandboxed`; absent when the shell tool is off. */
      shell: oneOfValues(['sandboxed', 'unsandboxed']),
      /** Each model endpoint's governor (daemon/upstream/), once a child has used it; absent when none is governed. */
      endpoints: arr(endpointStatus, 1024),
      /**
       * Present while the state dir cannot be written (full or read-only disk): the daemon still
       * answers, but refuses runs it cannot record. `reason` names each file and its errno.
       */
      degraded: obj(
        { reason: str(), faults: arr(obj({ path: str(), code: nonEmpty(64), since: str() }, ['path', 'code', 'since']), 1024) },
        ['reason', 'faults'],
      ),
    },
    ['daemon', 'protocolVersion', 'uptimeMs', 'stateDir', 'connections', 'runs', 'providers', 'shuttingDown', 'admission', 'memory'],
    true,
  ),
);
export type StatusResult = ResultOf<typeof StatusRequest>;

export const ShutdownRequest = defineRequest(
  'daemon/shutdown',
  obj({
    /** Refuse new starts and wait for running children before exiting. */
    drain: bool,
    /** How long a drain may wait before cancelling what still runs. */
    timeoutMs: int(0, 86_400_000),
  }),
  empty,
);
export type ShutdownParams = ParamsOf<typeof ShutdownRequest>;

/**
 * `subagentd cancel` (since 1.7): an operator's cancel of any live run, as its owner's `run/cancel`
 * would do it (descendants included). The `daemon/*` methods are the operator's surface: whoever
 * holds the daemon's token may already stop the whole daemon or read any run's session.
 */
export const OperatorCancelRequest = defineRequest(
  'daemon/cancel',
  obj(
    {
      runId,
      /** As for `run/cancel`: `now` (the default) or `after-step`. */
      level: interruptLevel,
    },
    ['runId'],
  ),
  empty,
);
export type OperatorCancelParams = ParamsOf<typeof OperatorCancelRequest>;

/**
 * `subagentd ui` (since 1.4): the daemon serves its web view on loopback (started at the first
 * ask) and answers a URL carrying a fresh one-time token; see docs/observability.md.
 */
export const UiRequest = defineRequest('daemon/ui', empty, obj({ url: nonEmpty(2048) }, ['url']));
export type UiResult = ResultOf<typeof UiRequest>;

/** What `daemon/gc` did: retention applied now (the daemon also applies it at start and daily). */
export const GcRequest = defineRequest(
  'daemon/gc',
  empty,
  obj(
    {
      /** Settled and disposed runs moved out of memory into the on-disk archive. */
      runsArchived: count,
      /** Stored runs removed past the age or count limit. */
      runsRemoved: count,
      /** Session logs removed past the age or count limit. */
      sessionsRemoved: count,
      /** Runs stored after the pass (archived records, a run changed since counted twice). */
      runsStored: count,
    },
    ['runsArchived', 'runsRemoved', 'sessionsRemoved', 'runsStored'],
  ),
);
export type GcResult = ResultOf<typeof GcRequest>;

/**
 * The operator's read of a run's session log (`subagentd inspect`, the ACP face's replay): any run,
 * whoever owns it, as the daemon stored it. The same trust as the 0600 files under the state dir,
 * which only the daemon's user can read; `run/inspect` stays the owner's view.
 */
export const SessionLogRequest = defineRequest(
  'daemon/session',
  obj({ runId }, ['runId']),
  obj({ header: sessionHeader, events: arr(sessionEvent, 1_000_000) }, ['header', 'events']),
);
export type SessionLogParams = ParamsOf<typeof SessionLogRequest>;
export type SessionLogResult = ResultOf<typeof SessionLogRequest>;

// ---------------------------------------------------------------------------------------------
// Continuable children, client → daemon. Every call names the caller's owner key: a secret the
// client chose (at least 16 characters; keep it out of logs), whose hash the daemon keeps in the
// child's durable record. Children belong to (owner key, parent session); other keys get NOT_OWNER.

const childMessageResult = obj({ childId, messageId: nonEmpty(128) }, ['childId', 'messageId']);
export type ChildMessageResult = Infer<typeof childMessageResult>;

export const ChildStartRequest = defineRequest(
  'child/start',
  obj(
    {
      ownerKey,
      provider: nonEmpty(128),
      /** The first message. */
      prompt: content,
      parent: parentRef,
      /** A short display name, shown by `child/list` and in the settlement notice. */
      label: str(1024),
      agentOptions,
      maxDepth: num,
      toolFilter,
      persona,
      env: childEnv,
      /** Worktree isolation, as on `subagent/start`. */
      ...isolationFields,
      /** The caller's W3C trace context: the child's spans continue its trace (since 1.4). */
      traceparent,
    },
    ['ownerKey', 'provider', 'prompt', 'parent'],
  ),
  childMessageResult,
);
export type ChildStartParams = ParamsOf<typeof ChildStartRequest>;

export const ChildSendRequest = defineRequest(
  'child/send',
  obj(
    {
      ownerKey,
      childId,
      /** The sender's session id: it must be the child's direct parent. */
      from: nonEmpty(256),
      message: content,
      /** The caller's W3C trace context: the turn this message runs continues its trace (since 1.7). */
      traceparent,
    },
    ['ownerKey', 'childId', 'from', 'message'],
  ),
  childMessageResult,
);
export type ChildSendParams = ParamsOf<typeof ChildSendRequest>;

export const ChildInterruptRequest = defineRequest(
  'child/interrupt',
  obj(
    {
      ownerKey,
      childId,
      /** The interrupter's session id: the child's parent or an ancestor. */
      by: nonEmpty(256),
      level: interruptLevel,
    },
    ['ownerKey', 'childId', 'by'],
  ),
  empty,
);
export type ChildInterruptParams = ParamsOf<typeof ChildInterruptRequest>;

export const ChildListRequest = defineRequest(
  'child/list',
  obj(
    {
      ownerKey,
      /** Whose children: a parent session id (a client's agent, or a child's own id). */
      of: nonEmpty(256),
      scope: oneOfValues(['children', 'descendants']),
    },
    ['ownerKey', 'of'],
  ),
  childListing,
);
export type ChildListParams = ParamsOf<typeof ChildListRequest>;

export const ChildAttachRequest = defineRequest(
  'child/attach',
  obj({ ownerKey }, ['ownerKey']),
  obj(
    {
      /** Settlement notices that waited for this owner and were sent now, as `child/settled`. */
      delivered: count,
    },
    ['delivered'],
  ),
);
export type ChildOwnerParams = ParamsOf<typeof ChildAttachRequest>;
export type ChildAttachResult = ResultOf<typeof ChildAttachRequest>;

// ---------------------------------------------------------------------------------------------
// Notifications, daemon → client

export const ProviderAddedNotification = defineNotification('subagent/provider-added', obj({ provider: providerDescriptor }, ['provider']));
export type ProviderAddedParams = ParamsOf<typeof ProviderAddedNotification>;

export const ProviderRemovedNotification = defineNotification('subagent/provider-removed', obj({ name: nonEmpty(128) }, ['name']));
export type ProviderRemovedParams = ParamsOf<typeof ProviderRemovedNotification>;

export const StartNotification = defineNotification('subagent/start', startEvent);

export const EndNotification = defineNotification(
  'subagent/end',
  obj(
    {
      ...startEventProperties,
      stopReason,
      lastAssistantMessage: content,
      usage,
      /** The run's result; absent when the run failed with an infrastructure fault (see `error`). */
      result,
      error: obj({ message: str(8192) }, ['message']),
    },
    ['runId', 'provider', 'id', 'local', 'stopReason'],
  ),
);
export type EndParams = ParamsOf<typeof EndNotification>;

/**
 * The model call failed in a way worth retrying (HTTP 429/5xx, connection refused) and will be
 * tried again after `delayMs`: the server's `Retry-After` when it gave one, else backoff.
 */
const retryEvent = obj(
  {
    kind: literal('retry'),
    /** The attempt about to be made after the delay; the first request is attempt 1. */
    attempt: intFrom(2),
    delayMs: count,
    /** What failed, e.g. `HTTP 429: Rate limit reached` or `cannot reach …`. */
    reason: str(8192),
    /** The HTTP status, when the server answered. */
    status: int(100, 599),
  },
  ['kind', 'attempt', 'delayMs', 'reason'],
);
export type RetryEvent = Infer<typeof retryEvent>;

/**
 * Since 1.5: the model step waits for its endpoint, not failing: `position` > 0 is its place in
 * the daemon's queue for the endpoint (1 is next); 0 means the request is sent and the provider
 * holds it (keep-alive comments before its first chunk), re-sent while that lasts.
 */
const modelWaitEvent = obj(
  {
    kind: literal('model-wait'),
    /** The endpoint's base URL (never its key). */
    endpoint: str(2048),
    position: count,
  },
  ['kind', 'endpoint', 'position'],
);
export type ModelWaitEvent = Infer<typeof modelWaitEvent>;

/**
 * Since 1.6: where the run stood before its start was answered, as run events (the same facts as
 * the start's `$/progress`, for owners that gave no token or that replay the stream). Held with the
 * run's other early events and sent, in order, right after the answer that names the run.
 * - `queued`: it waited for a run slot, `position` 1 being next;
 * - `agent-starting`: an ACP provider spawned its agent process, then initialized it.
 */
const queuedEvent = obj({ kind: literal('queued'), position: intFrom(1) }, ['kind', 'position']);
export type QueuedEvent = Infer<typeof queuedEvent>;
const agentStartingEvent = obj({ kind: literal('agent-starting'), stage: oneOfValues(['spawning', 'initializing']) }, ['kind', 'stage']);
export type AgentStartingEvent = Infer<typeof agentStartingEvent>;

/** The run event kinds a connection gets only from the protocol minor that added them. */
export const RUN_EVENT_SINCE_MINOR: Readonly<Record<string, number>> = { retry: 1, 'model-wait': 5, queued: 6, 'agent-starting': 6 };

/** Streamed progress of a run, sent only when the start asked for `stream`. */
const runEvent = splitOn(
  discriminated(
    'kind',
    obj({ kind: oneOfValues(['text-delta', 'reasoning-delta']), text: str(MAX_TEXT_BYTES) }, ['kind', 'text']),
    obj({ kind: literal('session'), event: sessionEvent }, ['kind', 'event']),
    retryEvent,
    modelWaitEvent,
    queuedEvent,
    agentStartingEvent,
  ),
  'kind',
);
export type RunEvent = Infer<typeof runEvent>;

export const RunEventNotification = defineNotification('run/event', obj({ runId, event: runEvent }, ['runId', 'event']));
export type RunEventParams = ParamsOf<typeof RunEventNotification>;

/** The most stretches one `run/events` carries, and the most events in one stretch (what a client accepts). */
export const MAX_BATCHED_EVENTS = 10_000;

/**
 * Since 1.3, to clients that said 1.3 or later at `initialize`: the run events a connection
 * produced in one event-loop turn, as one notification (older clients get a `run/event` each).
 * `runs` holds them in the order they were emitted, cut into stretches of consecutive events of
 * one run; a run may come back in a later stretch, after another run's.
 */
export const RunEventsNotification = defineNotification(
  'run/events',
  obj({ runs: arr(obj({ runId, events: arr(runEvent, MAX_BATCHED_EVENTS) }, ['runId', 'events']), MAX_BATCHED_EVENTS) }, ['runs']),
);
export type RunEventsParams = ParamsOf<typeof RunEventsNotification>;

/**
 * Where a start stands before its answer, sent only for a start that gave a `progressToken`:
 * - `queued`: waiting for a run slot; `position` 1 is next (re-sent as the queue moves);
 * - `starting`: admitted, the provider is starting the child;
 * - `agent`: an ACP provider is spawning its agent process, then initializing it;
 * - `ready`: published as `runId`; the answer follows.
 */
const startProgress = oneOf(
  obj({ kind: literal('queued'), position: intFrom(1) }, ['kind', 'position']),
  obj({ kind: literal('starting') }, ['kind']),
  obj({ kind: literal('agent'), stage: oneOfValues(['spawning', 'initializing']) }, ['kind', 'stage']),
  obj({ kind: literal('ready'), runId }, ['kind', 'runId']),
);
export type StartProgress = Infer<typeof startProgress>;

/** LSP's `$/progress`, carrying a start's progress (the only progress the daemon reports this way). */
export const StartProgressNotification = defineNotification('$/progress', obj({ token: progressToken, value: startProgress }, ['token', 'value']));
export type StartProgressParams = ParamsOf<typeof StartProgressNotification>;

/** A continuable child's turn settled with nothing left in its inbox; sent to its owner's connections. */
export const ChildSettledNotification = defineNotification(
  'child/settled',
  obj(
    {
      childId,
      /** The parent session the child belongs to. */
      parentId: nonEmpty(256),
      label: str(1024),
      messageId: nonEmpty(128),
      stopReason,
      text: str(64 * 1024),
    },
    ['childId', 'parentId', 'stopReason', 'text'],
  ),
);
export type ChildSettledParams = ParamsOf<typeof ChildSettledNotification>;

/** A continuable child used its `report` tool; sent to its owner's connections (not kept). */
export const ChildReportNotification = defineNotification(
  'child/report',
  obj(
    { childId, parentId: nonEmpty(256), label: str(1024), output: str(1024 * 1024), mode: oneOfValues(['quiet', 'next-step']) },
    ['childId', 'parentId', 'output', 'mode'],
  ),
);
export type ChildReportParams = ParamsOf<typeof ChildReportNotification>;

// ---------------------------------------------------------------------------------------------
// Requests, daemon → client

export const ToolCallRequest = defineRequest(
  'tool/call',
  obj({ runId, callId: nonEmpty(512), name: toolName, arguments: anyValue }, ['runId', 'callId', 'name']),
  obj({ content, isError: bool }, ['content']),
);
export type ToolCallParams = ParamsOf<typeof ToolCallRequest>;
export type ToolCallResult = ResultOf<typeof ToolCallRequest>;

const permissionOption = obj(
  {
    optionId: nonEmpty(256),
    name: str(1024),
    kind: oneOfValues(['allow_once', 'allow_always', 'reject_once', 'reject_always']),
  },
  ['optionId', 'name', 'kind'],
);
export type PermissionOption = Infer<typeof permissionOption>;

export const PermissionRequest = defineRequest(
  'permission/request',
  obj(
    {
      runId,
      /** What the child wants to do, as its agent described it. */
      title: str(16 * 1024),
      options: arr(permissionOption, 64),
    },
    ['runId', 'title', 'options'],
  ),
  oneOf(obj({ outcome: literal('selected'), optionId: nonEmpty(256) }, ['outcome', 'optionId']), obj({ outcome: literal('cancelled') }, ['outcome'])),
);
export type PermissionParams = ParamsOf<typeof PermissionRequest>;
export type PermissionResult = ResultOf<typeof PermissionRequest>;

// ---------------------------------------------------------------------------------------------

/** Every declared message, by direction: what docs/protocol.md must document, no more, no less. */
export const WIRE = {
  toDaemon: {
    requests: [
      InitializeRequest,
      LspShutdownRequest,
      ProvidersListRequest,
      StartRequest,
      CancelRequest,
      DisposeRequest,
      WaitRequest,
      SendMessageRequest,
      ResumeRequest,
      RunsListRequest,
      AttachRequest,
      InspectRequest,
      StatusRequest,
      ShutdownRequest,
      OperatorCancelRequest,
      UiRequest,
      GcRequest,
      SessionLogRequest,
      ChildStartRequest,
      ChildSendRequest,
      ChildInterruptRequest,
      ChildListRequest,
      ChildAttachRequest,
    ],
    notifications: [LspExitNotification, LspInitializedNotification],
  },
  toClient: {
    requests: [ToolCallRequest, PermissionRequest],
    notifications: [
      ProviderAddedNotification,
      ProviderRemovedNotification,
      StartNotification,
      EndNotification,
      RunEventNotification,
      RunEventsNotification,
      StartProgressNotification,
      ChildSettledNotification,
      ChildReportNotification,
    ],
  },
} as const;
