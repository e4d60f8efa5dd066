/**
 * JSON Schemas for every payload that crosses the socket, in both directions, and their
 * compiled validators. A payload that fails is answered with INVALID_REQUEST naming the field.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { MAX_TEXT_BYTES } from './output-cap.js';

type Schema = Record<string, unknown>;

const str = (maxLength = 4096): Schema => ({ type: 'string', maxLength });
const nonEmpty = (maxLength = 4096): Schema => ({ type: 'string', minLength: 1, maxLength });
const obj = (properties: Record<string, Schema>, required: string[] = [], extra = false): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
});
const arr = (items: Schema, maxItems = 10_000): Schema => ({ type: 'array', items, maxItems });
const count: Schema = { type: 'integer', minimum: 0 };
/** Numbers whose semantic checks (safe integer, -0, range) belong to the service, in seam order. */
const num: Schema = { type: 'number' };

const contentBlock: Schema = {
  type: 'object',
  required: ['type'],
  properties: { type: { enum: ['text', 'image'] } },
  allOf: [
    {
      if: { properties: { type: { const: 'text' } } },
      then: obj({ type: { const: 'text' }, text: str(MAX_TEXT_BYTES) }, ['type', 'text']),
    },
    {
      if: { properties: { type: { const: 'image' } } },
      then: obj({ type: { const: 'image' }, data: str(MAX_TEXT_BYTES), mimeType: nonEmpty(255) }, [
        'type',
        'data',
        'mimeType',
      ]),
    },
  ],
};
const ref = (name: string): Schema => ({ $ref: `subagentd#/definitions/${name}` });
const content = arr(ref('contentBlock'), 1000);

const usage = obj(
  {
    promptTokens: count,
    completionTokens: count,
    cacheHitTokens: count,
    cacheMissTokens: count,
    reasoningTokens: count,
  },
  ['promptTokens', 'completionTokens', 'cacheHitTokens', 'cacheMissTokens', 'reasoningTokens'],
);

const at = str(64);
const toolCall = obj({ id: nonEmpty(512), name: nonEmpty(256), arguments: str(MAX_TEXT_BYTES) }, [
  'id',
  'name',
  'arguments',
]);
const turnEndReason: Schema = {
  enum: ['completed', 'max-tokens', 'aborted', 'blocked', 'error', 'max-steps', 'interrupted'],
};

const sessionEventDefinition: Schema = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['user/message', 'steering/message', 'assistant/message', 'tool/result', 'usage', 'turn/end'] },
  },
  allOf: [
    {
      if: { properties: { type: { enum: ['user/message', 'steering/message'] } } },
      then: obj({ type: {}, content, at }, ['type', 'content']),
    },
    {
      if: { properties: { type: { const: 'assistant/message' } } },
      then: obj({ type: {}, content, reasoning: str(MAX_TEXT_BYTES), toolCalls: arr(toolCall, 256), at }, [
        'type',
        'content',
      ]),
    },
    {
      if: { properties: { type: { const: 'tool/result' } } },
      then: obj({ type: {}, callId: nonEmpty(512), name: nonEmpty(256), content, isError: { type: 'boolean' }, at }, [
        'type',
        'callId',
        'name',
        'content',
        'isError',
      ]),
    },
    { if: { properties: { type: { const: 'usage' } } }, then: obj({ type: {}, usage, at }, ['type', 'usage']) },
    {
      if: { properties: { type: { const: 'turn/end' } } },
      then: obj({ type: {}, reason: turnEndReason, diagnostic: str(8192), at }, ['type', 'reason']),
    },
  ],
};

const sessionEvent = ref('sessionEvent');

const capabilities = obj(
  {
    outputSchema: { type: 'boolean' },
    depthLimit: { type: 'boolean' },
    toolFilter: { type: 'boolean' },
    persona: { type: 'boolean' },
  },
  ['outputSchema', 'depthLimit', 'toolFilter', 'persona'],
);
const providerDescriptor = obj(
  {
    name: nonEmpty(128),
    capabilities,
    inheritsParentContext: { type: 'boolean' },
    runtime: obj({ sendMessage: { type: 'boolean' }, resume: { type: 'boolean' } }, ['sendMessage', 'resume']),
  },
  ['name', 'capabilities', 'inheritsParentContext', 'runtime'],
);

const toolName = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' };
const parentRef = obj(
  {
    sessionId: nonEmpty(256),
    cwd: { type: 'string', minLength: 1, maxLength: 4096, pattern: '^/' },
    delegationDepth: num,
    subagentDepth: num,
    events: arr(sessionEvent, 100_000),
  },
  ['sessionId', 'cwd'],
);
const toolFilter: Schema = {
  oneOf: [obj({ allow: arr(toolName, 256) }, ['allow']), obj({ deny: arr(toolName, 256) }, ['deny'])],
};
const agentOptions: Schema = {
  type: 'object',
  properties: { model: nonEmpty(256), subagentDepth: num },
  additionalProperties: true,
};
const runId = nonEmpty(128);
const result = obj(
  {
    output: content,
    structured: {},
    diagnostic: str(8192),
    stopReason: nonEmpty(64),
    usage,
  },
  ['output', 'stopReason'],
);
const startEvent = obj({ runId, provider: nonEmpty(128), id: nonEmpty(256), local: { type: 'boolean' } }, [
  'runId',
  'provider',
  'id',
  'local',
]);
const runInfo = obj(
  {
    runId,
    id: nonEmpty(256),
    provider: nonEmpty(128),
    state: { enum: ['starting', 'running', 'settled', 'disposed'] },
    stopReason: nonEmpty(64),
    startedAt: str(64),
    settledAt: str(64),
    mine: { type: 'boolean' },
    parentRunId: runId,
    usage,
    diagnostic: str(8192),
  },
  ['runId', 'id', 'provider', 'state', 'startedAt', 'mine'],
);
/** LSP's `integer | string`; the string bounded like an id. */
const progressToken: Schema = { type: ['string', 'integer'], minLength: 1, maxLength: 256 };
const interruptLevel: Schema = { enum: ['after-step', 'now'] };
const childId = nonEmpty(256);
/** A secret the client chose; only its hash is kept. */
const ownerKey: Schema = { type: 'string', minLength: 16, maxLength: 256 };
const childListing = obj(
  {
    entries: arr(
      obj(
        {
          id: childId,
          status: { enum: ['running', 'idle'] },
          label: str(1024),
          hasChildren: { type: 'boolean' },
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
);
const identity = obj(
  { name: { const: 'subagentd' }, version: str(64), pid: count, startedAt: str(64), epoch: nonEmpty(128) },
  ['name', 'version', 'pid', 'startedAt', 'epoch'],
);

/** Inbound at the daemon. */
export const requestSchemas = {
  // Our clients: protocolVersion and clientInfo. LSP-style clients: their usual fields, ours in
  // initializationOptions; whichever is missing is judged by the connection (it names the field).
  initialize: obj(
    {
      protocolVersion: nonEmpty(64),
      clientInfo: obj({ name: nonEmpty(256), version: str(64) }, ['name']),
      token: str(1024),
      processId: { type: ['integer', 'null'] },
      rootUri: { type: ['string', 'null'], maxLength: 4096 },
      rootPath: { type: ['string', 'null'], maxLength: 4096 },
      capabilities: { type: 'object' },
      initializationOptions: obj({ protocolVersion: nonEmpty(64), token: str(1024) }, [], true),
      locale: str(64),
      trace: str(64),
      workspaceFolders: { type: ['array', 'null'], maxItems: 1024 },
      workDoneToken: { type: ['string', 'integer'] },
    },
    [],
  ),
  shutdown: obj({}),
  'providers/list': obj({}),
  'subagent/start': obj(
    {
      provider: nonEmpty(128),
      label: str(256),
      prompt: content,
      parent: parentRef,
      agentOptions,
      outputSchema: { type: 'object' },
      maxDepth: num,
      toolFilter,
      persona: { type: 'string', maxLength: 256 * 1024 },
      tools: arr(
        obj({ name: toolName, description: str(16 * 1024), inputSchema: { type: 'object' } }, [
          'name',
          'description',
          'inputSchema',
        ]),
        128,
      ),
      env: { type: 'object', additionalProperties: str(64 * 1024), maxProperties: 256 },
      stream: { type: 'boolean' },
      progressToken,
    },
    ['provider', 'prompt', 'parent'],
  ),
  'run/cancel': obj({ runId, level: interruptLevel }, ['runId']),
  'run/dispose': obj({ runId }, ['runId']),
  'run/wait': obj({ runId }, ['runId']),
  'run/inspect': obj({ runId, runToken: nonEmpty(256) }, ['runId']),
  'run/attach': obj({ runId, runToken: nonEmpty(256), stream: { type: 'boolean' } }, ['runId', 'runToken']),
  'run/sendMessage': obj({ runId, content }, ['runId', 'content']),
  'run/resume': obj({ runId, prompt: content, stream: { type: 'boolean' } }, ['runId', 'prompt']),
  'runs/list': obj({
    state: { enum: ['starting', 'running', 'settled', 'disposed'] },
    provider: nonEmpty(128),
    mine: { type: 'boolean' },
    since: str(64),
    limit: { type: 'integer', minimum: 1, maximum: 100_000 },
    cursor: nonEmpty(256),
  }),
  'child/start': obj(
    {
      ownerKey,
      provider: nonEmpty(128),
      prompt: content,
      parent: parentRef,
      label: str(1024),
      agentOptions,
      maxDepth: num,
      toolFilter,
      persona: { type: 'string', maxLength: 256 * 1024 },
      env: { type: 'object', additionalProperties: str(64 * 1024), maxProperties: 256 },
    },
    ['ownerKey', 'provider', 'prompt', 'parent'],
  ),
  'child/send': obj({ ownerKey, childId, from: nonEmpty(256), message: content }, ['ownerKey', 'childId', 'from', 'message']),
  'child/interrupt': obj({ ownerKey, childId, by: nonEmpty(256), level: interruptLevel }, ['ownerKey', 'childId', 'by']),
  'child/list': obj({ ownerKey, of: nonEmpty(256), scope: { enum: ['children', 'descendants'] } }, ['ownerKey', 'of']),
  'child/attach': obj({ ownerKey }, ['ownerKey']),
  'daemon/status': obj({}),
  'daemon/shutdown': obj({ drain: { type: 'boolean' }, timeoutMs: { type: 'integer', minimum: 0, maximum: 86_400_000 } }),
  'daemon/gc': obj({}),
  /** Replies to daemon → client requests. */
  'tool/call#result': obj({ content, isError: { type: 'boolean' } }, ['content']),
  'permission/request#result': {
    oneOf: [
      obj({ outcome: { const: 'selected' }, optionId: nonEmpty(256) }, ['outcome', 'optionId']),
      obj({ outcome: { const: 'cancelled' } }, ['outcome']),
    ],
  },
} as const satisfies Record<string, Schema>;

/** Inbound at the client: daemon results, notifications and daemon → client requests. */
export const clientInboundSchemas = {
  'initialize#result': obj(
    {
      protocolVersion: nonEmpty(64),
      daemon: identity,
      providers: arr(providerDescriptor, 1024),
      features: { type: 'object', properties: { continuableChildren: { type: 'boolean' } } },
    },
    ['protocolVersion', 'daemon', 'providers'],
    true,
  ),
  'providers/list#result': obj({ providers: arr(providerDescriptor, 1024) }, ['providers'], true),
  'subagent/start#result': obj(
    { runId, provider: nonEmpty(128), id: nonEmpty(256), local: { type: 'boolean' }, runToken: nonEmpty(256) },
    ['runId', 'provider', 'id', 'local', 'runToken'],
  ),
  'run/attach#result': obj({ run: runInfo, result }, ['run']),
  'run/wait#result': result,
  'subagent/provider-added': obj({ provider: providerDescriptor }, ['provider']),
  'subagent/provider-removed': obj({ name: nonEmpty(128) }, ['name']),
  'subagent/start': startEvent,
  'subagent/end': obj(
    {
      runId,
      provider: nonEmpty(128),
      id: nonEmpty(256),
      local: { type: 'boolean' },
      stopReason: nonEmpty(64),
      lastAssistantMessage: content,
      usage,
      result,
      error: obj({ message: str(8192) }, ['message']),
    },
    ['runId', 'provider', 'id', 'local', 'stopReason'],
  ),
  'run/event': obj(
    {
      runId,
      event: {
        oneOf: [
          obj({ kind: { enum: ['text-delta', 'reasoning-delta'] }, text: str(MAX_TEXT_BYTES) }, ['kind', 'text']),
          obj({ kind: { const: 'session' }, event: sessionEvent }, ['kind', 'event']),
          obj(
            { kind: { const: 'retry' }, attempt: { type: 'integer', minimum: 2 }, delayMs: count, reason: str(8192), status: { type: 'integer', minimum: 100, maximum: 599 } },
            ['kind', 'attempt', 'delayMs', 'reason'],
          ),
        ],
      },
    },
    ['runId', 'event'],
  ),
  '$/progress': obj(
    {
      token: progressToken,
      value: {
        oneOf: [
          obj({ kind: { const: 'queued' }, position: { type: 'integer', minimum: 1 } }, ['kind', 'position']),
          obj({ kind: { const: 'starting' } }, ['kind']),
          obj({ kind: { const: 'agent' }, stage: { enum: ['spawning', 'initializing'] } }, ['kind', 'stage']),
          obj({ kind: { const: 'ready' }, runId }, ['kind', 'runId']),
        ],
      },
    },
    ['token', 'value'],
  ),
  'child/start#result': obj({ childId, messageId: nonEmpty(128) }, ['childId', 'messageId']),
  'child/send#result': obj({ childId, messageId: nonEmpty(128) }, ['childId', 'messageId']),
  'child/list#result': childListing,
  'child/attach#result': obj({ delivered: count }, ['delivered']),
  'child/report': obj(
    { childId, parentId: nonEmpty(256), label: str(1024), output: str(1024 * 1024), mode: { enum: ['quiet', 'next-step'] } },
    ['childId', 'parentId', 'output', 'mode'],
  ),
  'child/settled': obj(
    { childId, parentId: nonEmpty(256), label: str(1024), messageId: nonEmpty(128), stopReason: nonEmpty(64), text: str(64 * 1024) },
    ['childId', 'parentId', 'stopReason', 'text'],
  ),
  'runs/list#result': obj({ runs: arr(runInfo, 1_000_000), nextCursor: nonEmpty(256) }, ['runs'], true),
  'daemon/gc#result': obj(
    { runsArchived: count, runsRemoved: count, sessionsRemoved: count, runsStored: count },
    ['runsArchived', 'runsRemoved', 'sessionsRemoved', 'runsStored'],
  ),
  'run/inspect#result': obj({ run: runInfo, header: { type: 'object' }, events: arr(sessionEvent, 1_000_000) }, ['run']),
  'daemon/status#result': obj(
    {
      daemon: identity,
      protocolVersion: nonEmpty(64),
      uptimeMs: count,
      stateDir: str(),
      connections: count,
      runs: { type: 'object', additionalProperties: count },
      providers: arr(nonEmpty(128), 1024),
      shuttingDown: { type: 'boolean' },
      degraded: obj(
        { reason: str(), faults: arr(obj({ path: str(), code: nonEmpty(64), since: str() }, ['path', 'code', 'since']), 1024) },
        ['reason', 'faults'],
      ),
    },
    ['daemon', 'protocolVersion', 'uptimeMs', 'stateDir', 'connections', 'runs', 'providers', 'shuttingDown'],
    true,
  ),
  'tool/call': obj({ runId, callId: nonEmpty(512), name: toolName, arguments: {} }, ['runId', 'callId', 'name']),
  'permission/request': obj(
    {
      runId,
      title: str(16 * 1024),
      options: arr(
        obj(
          {
            optionId: nonEmpty(256),
            name: str(1024),
            kind: { enum: ['allow_once', 'allow_always', 'reject_once', 'reject_always'] },
          },
          ['optionId', 'name', 'kind'],
        ),
        64,
      ),
    },
    ['runId', 'title', 'options'],
  ),
} as const satisfies Record<string, Schema>;


// No meta-schema check of our own schemas at run time: it compiles the whole draft-07 meta-schema
// (~45 ms of CPU at every start of the daemon and of every command). test/schema-meta.spec.ts
// checks them once instead.
const ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true, validateSchema: false });
// Shared pieces are compiled once and referenced, which keeps start-up fast.
ajv.addSchema({ $id: 'subagentd', definitions: { contentBlock, sessionEvent: sessionEventDefinition } });

/** Validators compile on first use: each side pays only for the payloads it receives. */
function lazyValidators<K extends string>(schemas: Record<K, Schema>): (kind: K) => ValidateFunction {
  const compiled = new Map<K, ValidateFunction>();
  return (kind) => {
    let validate = compiled.get(kind);
    if (!validate) {
      validate = ajv.compile(schemas[kind]);
      compiled.set(kind, validate);
    }
    return validate;
  };
}

const daemonValidator = lazyValidators(requestSchemas);
const clientValidator = lazyValidators(clientInboundSchemas);

/** Why a payload failed: the JSON pointer of the field and what was wrong with it. */
export interface ValidationFailure {
  readonly field: string;
  readonly message: string;
}

/** A key as a JSON-pointer token (RFC 6901), as Ajv writes the rest of the path. */
const pointerToken = (key: unknown): string => String(key).replace(/~/g, '~0').replace(/\//g, '~1');

function check(validate: ValidateFunction, value: unknown): ValidationFailure | undefined {
  if (validate(value)) return undefined;
  const error = validate.errors?.[0];
  if (!error) return { field: '/', message: 'is invalid' };
  const missing = error.keyword === 'required' ? `/${pointerToken(error.params['missingProperty'])}` : '';
  const extra = error.keyword === 'additionalProperties' ? `/${pointerToken(error.params['additionalProperty'])}` : '';
  const field = `${error.instancePath}${missing}${extra}` || '/';
  const why = error.keyword === 'required' ? 'is required' : error.keyword === 'additionalProperties' ? 'is not allowed' : error.message;
  return { field, message: `${field} ${why ?? 'is invalid'}` };
}

export type DaemonInbound = keyof typeof requestSchemas;
export type ClientInbound = keyof typeof clientInboundSchemas;

export function validateAtDaemon(kind: DaemonInbound, value: unknown): ValidationFailure | undefined {
  return check(daemonValidator(kind), value);
}

export function validateAtClient(kind: ClientInbound, value: unknown): ValidationFailure | undefined {
  return check(clientValidator(kind), value);
}

let sessionEventValidator: ValidateFunction | undefined;
export function validateSessionEvent(value: unknown): ValidationFailure | undefined {
  sessionEventValidator ??= ajv.compile(sessionEvent);
  return check(sessionEventValidator, value);
}
