/**
 * The schemas of the payloads that several wire messages share, written once with the typed
 * builder (json-schema.ts): each is the JSON Schema Ajv checks and, through `Infer`, the type
 * both sides use. The messages themselves are declared in messages.ts.
 *
 * Content blocks and session events are told apart by their `type` (`discriminated`: only the
 * variant named is checked, so a failure names the exact field of that variant, e.g.
 * `/prompt/1/text`); their types are the seam's (seam.ts), not derived.
 * They are shared definitions, compiled once and referenced (`$ref`), which keeps each message's
 * validator small.
 */
import { RUN_STATES } from './run-states.js';
import {
  anyObject,
  anyValue,
  arr,
  bool,
  count,
  declared,
  discriminated,
  literal,
  matching,
  nonEmpty,
  num,
  obj,
  oneOf,
  oneOfValues,
  record,
  seamShaped,
  str,
  strBetween,
  stringOrInteger,
  type Infer,
  type JsonSchema,
} from './json-schema.js';
import { MAX_TEXT_BYTES } from './output-cap.js';
import type {
  AgentOptions,
  ChildListing,
  ContentBlock,
  InterruptLevel,
  ObjectJsonSchema,
  SessionEvent,
  SessionHeader,
  SubagentCapabilities,
  SubagentResult,
  SubagentStartEvent,
  SubagentStopReason,
  ToolFilter,
  Usage,
  WorktreeOutcome,
} from './seam.js';

// ---------------------------------------------------------------------------------------------
// Shared definitions (by reference)

/** The id under which the shared definitions are registered with Ajv. */
export const DEFINITIONS_ID = 'subagentd';
const ref = <T>(name: keyof typeof definitions) => declared<T>({ $ref: `${DEFINITIONS_ID}#/definitions/${name}` });

const contentBlockDefinition: JsonSchema = discriminated(
  'type',
  obj({ type: literal('text'), text: str(MAX_TEXT_BYTES) }, ['type', 'text']),
  obj({ type: literal('image'), data: str(MAX_TEXT_BYTES), mimeType: nonEmpty(255) }, ['type', 'data', 'mimeType']),
);
export const content = arr(ref<ContentBlock>('contentBlock'), 1000);

export const usage = seamShaped<Usage>()(
  obj(
    { promptTokens: count, completionTokens: count, cacheHitTokens: count, cacheMissTokens: count, reasoningTokens: count },
    ['promptTokens', 'completionTokens', 'cacheHitTokens', 'cacheMissTokens', 'reasoningTokens'],
  ),
);

const at = str(64);
const toolCall = obj({ id: nonEmpty(512), name: nonEmpty(256), arguments: str(MAX_TEXT_BYTES) }, ['id', 'name', 'arguments']);
const turnEndReason = oneOfValues(['completed', 'max-tokens', 'aborted', 'blocked', 'error', 'max-steps', 'interrupted']);

const sessionEventDefinition: JsonSchema = discriminated(
  'type',
  obj({ type: oneOfValues(['user/message', 'steering/message']), content, at }, ['type', 'content']),
  obj({ type: literal('assistant/message'), content, reasoning: str(MAX_TEXT_BYTES), toolCalls: arr(toolCall, 256), at }, ['type', 'content']),
  obj({ type: literal('tool/result'), callId: nonEmpty(512), name: nonEmpty(256), content, isError: bool, at }, ['type', 'callId', 'name', 'content', 'isError']),
  obj({ type: literal('usage'), usage, at }, ['type', 'usage']),
  obj({ type: literal('turn/end'), reason: turnEndReason, diagnostic: str(8192), at }, ['type', 'reason']),
);
export const sessionEvent = ref<SessionEvent>('sessionEvent');

const definitions = { contentBlock: contentBlockDefinition, sessionEvent: sessionEventDefinition };
/** Registered once with Ajv, before the first validator compiles. */
export const SHARED_DEFINITIONS: JsonSchema = { $id: DEFINITIONS_ID, definitions };

// ---------------------------------------------------------------------------------------------
// Shared payloads

export const stopReason = seamShaped<SubagentStopReason>()(nonEmpty(64));

const capabilities = seamShaped<SubagentCapabilities>()(
  obj({ outputSchema: bool, depthLimit: bool, toolFilter: bool, persona: bool }, ['outputSchema', 'depthLimit', 'toolFilter', 'persona']),
);

/** What a client learns about a provider: the seam's descriptor plus its runtime capabilities. */
export const providerDescriptor = obj(
  {
    name: nonEmpty(128),
    capabilities,
    inheritsParentContext: bool,
    /** Runtime capabilities: the run handle has `sendMessage` / `resume` exactly when true. */
    runtime: obj({ sendMessage: bool, resume: bool }, ['sendMessage', 'resume']),
  },
  ['name', 'capabilities', 'inheritsParentContext', 'runtime'],
);
export type ProviderDescriptor = Infer<typeof providerDescriptor>;

export const toolName = matching('^[A-Za-z0-9_-]{1,64}$');

/** The parent agent, as a reference: what the daemon needs of it across the process boundary. */
export const parentRef = obj(
  {
    sessionId: nonEmpty(256),
    /** Absolute working directory of the parent session; the child works there. */
    cwd: matching('^/', { minLength: 1, maxLength: 4096 }),
    /** The parent's stored `SessionHeader.delegationDepth`. */
    delegationDepth: num,
    /** The parent's runtime `AgentOptions.subagentDepth`. */
    subagentDepth: num,
    /** For `fork`: the parent's session events (a balanced completed-turn prefix). */
    events: arr(sessionEvent, 100_000),
  },
  ['sessionId', 'cwd'],
);
export type ParentRef = Infer<typeof parentRef>;

export const toolFilter = seamShaped<ToolFilter>()(
  oneOf(obj({ allow: arr(toolName, 256) }, ['allow']), obj({ deny: arr(toolName, 256) }, ['deny'])),
);
/** Open: provider extension fields pass through. */
export const agentOptions = seamShaped<AgentOptions>()(obj({ model: nonEmpty(256), subagentDepth: num }, [], true));
/** Free-form here; the service checks it against the supported subset (UNSUPPORTED_SCHEMA). */
export const outputSchema = declared<ObjectJsonSchema>(anyObject);
export const persona = str(256 * 1024);
export const childEnv = record(str(64 * 1024), 256);

export const runId = nonEmpty(128);

/** A start's isolation (`worktree`: the child works in its own git worktree and branch). */
export const isolation = oneOfValues(['none', 'worktree']);
export type Isolation = Infer<typeof isolation>;
/** What happens to a worktree at dispose: `auto` removes it (keeping a branch with changes), `keep` keeps both, `always` drops both. */
export const worktreeCleanup = oneOfValues(['auto', 'keep', 'always']);
export type WorktreeCleanup = Infer<typeof worktreeCleanup>;
/** The start fields of worktree isolation, shared by `subagent/start` and `child/start`. */
export const isolationFields = {
  isolation,
  /** The commit the worktree is made at (a branch, tag or commit of the parent's repository); default HEAD. */
  baseRef: nonEmpty(256),
  /** Carry the parent's uncommitted changes (tracked and untracked) into the worktree. */
  includeUncommitted: bool,
  cleanup: worktreeCleanup,
};

export const worktreeOutcome = seamShaped<WorktreeOutcome>()(
  obj(
    {
      path: nonEmpty(4096),
      branch: nonEmpty(512),
      baseRef: nonEmpty(256),
      baseCommit: nonEmpty(64),
      headCommit: nonEmpty(64),
      changed: obj({ files: count, insertions: count, deletions: count }, ['files', 'insertions', 'deletions']),
      committed: bool,
      parentUncommitted: oneOfValues(['left', 'carried']),
    },
    ['path', 'branch', 'baseRef', 'baseCommit', 'headCommit', 'changed', 'committed'],
  ),
);

export const result = seamShaped<SubagentResult>()(
  obj({ output: content, structured: anyValue, diagnostic: str(8192), stopReason, usage, worktree: worktreeOutcome }, ['output', 'stopReason']),
);

export const startEventProperties = { runId, provider: nonEmpty(128), id: nonEmpty(256), local: bool };
export const startEvent = seamShaped<SubagentStartEvent>()(obj(startEventProperties, ['runId', 'provider', 'id', 'local']));

export const runState = oneOfValues(RUN_STATES);
export type RunState = Infer<typeof runState>;

/** The daemon executing a run: a cluster member, or the one daemon. `pid` is that daemon's own process. */
export const workerRef = obj(
  {
    id: nonEmpty(256),
    host: str(256),
    pid: count,
    /** 1.5, cluster members only: the roots of the workspaces the member serves (`/`: any cwd that exists there). */
    workspaces: arr(str(4096), 1024),
  },
  ['id', 'host', 'pid'],
);
export type WorkerRef = Infer<typeof workerRef>;

export const runInfo = obj(
  {
    runId,
    id: nonEmpty(256),
    provider: nonEmpty(128),
    state: runState,
    stopReason,
    startedAt: str(64),
    settledAt: str(64),
    /** Whether the asking connection owns the run. */
    mine: bool,
    /** Nested delegation: the run whose child started this one. */
    parentRunId: runId,
    usage,
    /** The settled result's diagnostic (why it failed, what was refused), as stored. */
    diagnostic: str(8192),
    /** 1.3: the daemon executing (or that executed) the run; sent only to clients of minor 3 or later. */
    worker: workerRef,
  },
  ['runId', 'id', 'provider', 'state', 'startedAt', 'mine'],
);
export type RunInfo = Infer<typeof runInfo>;

/** A session header as stored; the daemon reads it back from its own files. */
export const sessionHeader = declared<SessionHeader>(anyObject);

/** LSP's `integer | string`; the string bounded like an id. */
export const progressToken = stringOrInteger({ minLength: 1, maxLength: 256 });

/**
 * W3C Trace Context `traceparent` (version 00): the caller's span, which the run's spans continue
 * (docs/observability.md). Since 1.4; a daemon with tracing off ignores it.
 */
export const traceparent = matching('^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$', { maxLength: 55 });
export type ProgressToken = Infer<typeof progressToken>;

export const interruptLevel = seamShaped<InterruptLevel>()(oneOfValues(['after-step', 'now']));
export const childId = nonEmpty(256);
/** A secret the client chose; only its hash is kept. */
export const ownerKey = strBetween(16, 256);

export const childListing = seamShaped<ChildListing>()(
  obj(
    {
      entries: arr(
        obj(
          {
            id: childId,
            status: oneOfValues(['running', 'idle']),
            label: str(1024),
            hasChildren: bool,
            parentId: nonEmpty(256),
            depth: count,
          },
          ['id', 'status', 'hasChildren'],
        ),
        100_000,
      ),
      diagnostics: arr(str(8192), 10_000),
    },
    ['entries', 'diagnostics'],
  ),
);

export const daemonIdentity = obj(
  {
    name: literal('subagentd'),
    version: str(64),
    pid: count,
    startedAt: str(64),
    /** Random per daemon process: a reconnecting client compares it to detect a restart. */
    epoch: nonEmpty(128),
  },
  ['name', 'version', 'pid', 'startedAt', 'epoch'],
);
export type DaemonIdentity = Infer<typeof daemonIdentity>;
