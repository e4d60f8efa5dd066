/**
 * Property tests of the wire validators: for every declared message (protocol/messages.ts), its
 * params and, for a request, its result — each checked by the receiver, results also by the side
 * that answers —, random values and mutations of a valid example never make the validator throw, and every rejection
 * names a field as a JSON pointer. Mutations whose outcome is known (a dropped required field,
 * a wrong type, an unknown field, a string one past its bound) must be rejected at that field.
 *
 * Bounded: 200 runs per property. The seed is fixed per process (FC_SEED overrides it) and is
 * printed whenever a property fails, together with fast-check's counterexample path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CancelRequest, describeAjvError, StartNotification, StartRequest, WIRE, type JsonSchema, type ValidationFailure } from '../protocol/index.js';
import { prebuiltValidators, WIRE_VALIDATORS_DIR } from '../protocol/validation.js';

const SEED = process.env['FC_SEED'] !== undefined ? Number(process.env['FC_SEED']) : Date.now() % 2_147_483_647;
const NUM_RUNS = 200;

/** Runs a property with the bounded settings; on failure the seed goes to the log and the error. */
function check<T>(name: string, arbitrary: fc.Arbitrary<T>, predicate: (value: T) => void): void {
  try {
    fc.assert(fc.property(arbitrary, predicate), { numRuns: NUM_RUNS, seed: SEED, endOnFailure: false });
  } catch (error) {
    console.log(`[fuzz-schemas] "${name}" failed; reproduce with FC_SEED=${SEED}`);
    throw error;
  }
}

type Schema = JsonSchema;
type Validate = (value: unknown) => ValidationFailure | undefined;

// ---------------------------------------------------------------------------------------------
// Valid examples: at least one per checked payload ("<method> params", "<method> result",
// "<method> notification"). A message declared without an example fails the "every payload has
// an example" test below (not the build).

const text = { type: 'text', text: 'hello' };
const image = { type: 'image', data: 'AAAA', mimeType: 'image/png' };
const usage = { promptTokens: 1, completionTokens: 2, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 };
const sessionEvents = [
  { type: 'user/message', content: [text], at: '2026-01-01T00:00:00.000Z' },
  { type: 'assistant/message', content: [text], reasoning: 'r', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{}' }] },
  { type: 'tool/result', callId: 'c1', name: 'read_file', content: [text], isError: false },
  { type: 'steering/message', content: [text] },
  { type: 'usage', usage },
  { type: 'turn/end', reason: 'completed', diagnostic: 'ok' },
];
const identity = { name: 'subagentd', version: '0.1.0', pid: 42, startedAt: '2026-01-01T00:00:00.000Z', epoch: 'abcdefgh' };
const descriptor = {
  name: 'echo',
  capabilities: { outputSchema: true, depthLimit: true, toolFilter: false, persona: true },
  inheritsParentContext: false,
  runtime: { sendMessage: true, resume: false },
};
const result = { output: [text], structured: { any: ['thing'] }, diagnostic: 'd', stopReason: 'completed', usage };
const runInfo = {
  runId: 'run_1',
  id: 'child-1',
  provider: 'echo',
  state: 'settled',
  stopReason: 'completed',
  startedAt: '2026-01-01T00:00:00.000Z',
  settledAt: '2026-01-01T00:00:01.000Z',
  mine: true,
  usage,
};

const OWNER_KEY = 'an-owner-key-of-16-or-more';

const examples: Partial<Record<string, unknown[]>> = {
  'initialize params': [
    { protocolVersion: '1.0.0', clientInfo: { name: 'fuzz', version: '1' }, token: 't' },
    { processId: 7, rootUri: null, capabilities: {}, initializationOptions: { protocolVersion: '1.0.0', token: 't' }, trace: 'off' },
  ],
  'providers/list params': [{}],
  'subagent/start params': [
    { provider: 'echo', prompt: [text], parent: { sessionId: 's', cwd: '/tmp' } },
    {
      provider: 'spawn',
      prompt: [text, image],
      parent: { sessionId: 's', cwd: '/tmp', delegationDepth: 0, subagentDepth: 1, events: sessionEvents },
      agentOptions: { model: 'scripted:/tmp/x.json', subagentDepth: 1, vendorKnob: { a: 1 } },
      outputSchema: { type: 'object', properties: {} },
      maxDepth: 3,
      toolFilter: { allow: ['read_file', 'list_directory'] },
      persona: 'You are terse.',
      tools: [{ name: 'lookup', description: 'look something up', inputSchema: { type: 'object' } }],
      env: { PATH: '/usr/bin' },
      stream: true,
      progressToken: 'start-1',
    },
    { provider: 'echo', prompt: [text], parent: { sessionId: 's', cwd: '/tmp' }, progressToken: 7 },
  ],
  'run/cancel params': [{ runId: 'run_1' }, { runId: 'run_1', level: 'after-step' }],
  'run/dispose params': [{ runId: 'run_1' }],
  'run/wait params': [{ runId: 'run_1' }],
  'run/inspect params': [{ runId: 'run_1' }],
  'run/attach params': [{ runId: 'run_1', runToken: 'tok' }],
  'run/sendMessage params': [{ runId: 'run_1', content: [text] }],
  'run/resume params': [
    { runId: 'run_1', prompt: [text], stream: false },
    { runId: 'run_1', prompt: [text], traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
  ],
  'runs/list params': [{}, { state: 'running', provider: 'echo' }],
  'child/start params': [
    { ownerKey: OWNER_KEY, provider: 'spawn', prompt: [text], parent: { sessionId: 's', cwd: '/tmp' } },
    { ownerKey: OWNER_KEY, provider: 'spawn', prompt: [text], parent: { sessionId: 's', cwd: '/tmp' }, label: 'l', maxDepth: 2, persona: 'p', env: { A: 'b' } },
  ],
  'child/send params': [
    { ownerKey: OWNER_KEY, childId: 'child-1', from: 's', message: [text] },
    { ownerKey: OWNER_KEY, childId: 'child-1', from: 's', message: [text], traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
  ],
  'child/interrupt params': [{ ownerKey: OWNER_KEY, childId: 'child-1', by: 's' }, { ownerKey: OWNER_KEY, childId: 'child-1', by: 's', level: 'now' }],
  'child/list params': [{ ownerKey: OWNER_KEY, of: 's' }, { ownerKey: OWNER_KEY, of: 's', scope: 'descendants' }],
  'child/attach params': [{ ownerKey: OWNER_KEY }],
  'daemon/status params': [{}],
  'shutdown params': [{}],
  'daemon/shutdown params': [{}, { drain: true, timeoutMs: 1000 }],
  'daemon/gc params': [{}],
  'daemon/ui params': [{}],
  'daemon/cancel params': [{ runId: 'run_0123456789abcdef01234567' }, { runId: 'run_1', level: 'after-step' }],
  'daemon/session params': [{ runId: 'run_0123456789abcdef01234567' }],
  'tool/call result': [{ content: [text], isError: false }],
  'permission/request result': [{ outcome: 'selected', optionId: 'allow' }, { outcome: 'cancelled' }],
  'exit notification': [{}],
  'initialized notification': [{}],
  'initialize result': [{ protocolVersion: '1.0.0', daemon: identity, providers: [descriptor] }],
  'providers/list result': [{ providers: [descriptor] }],
  'subagent/start result': [{ runId: 'run_1', provider: 'echo', id: 'child-1', local: false, runToken: 'tok' }],
  'run/attach result': [{ run: runInfo, result }],
  'run/wait result': [result],
  'subagent/provider-added notification': [{ provider: descriptor }],
  'subagent/provider-removed notification': [{ name: 'echo' }],
  'subagent/start notification': [{ runId: 'run_1', provider: 'echo', id: 'child-1', local: false }],
  'subagent/end notification': [
    { runId: 'run_1', provider: 'echo', id: 'child-1', local: false, stopReason: 'completed', lastAssistantMessage: [text], usage, result },
    { runId: 'run_1', provider: 'echo', id: 'child-1', local: true, stopReason: 'error', error: { message: 'lost' } },
  ],
  'run/event notification': [
    { runId: 'run_1', event: { kind: 'text-delta', text: 'x' } },
    { runId: 'run_1', event: { kind: 'session', event: sessionEvents[1] } },
    { runId: 'run_1', event: { kind: 'retry', attempt: 2, delayMs: 1000, reason: 'HTTP 429: Rate limit reached', status: 429 } },
    { runId: 'run_1', event: { kind: 'retry', attempt: 3, delayMs: 250, reason: 'cannot reach http://127.0.0.1:9/v1' } },
    { runId: 'run_1', event: { kind: 'queued', position: 2 } },
    { runId: 'run_1', event: { kind: 'agent-starting', stage: 'initializing' } },
  ],
  'run/events notification': [
    {
      runs: [
        { runId: 'run_1', events: [{ kind: 'text-delta', text: 'x' }, { kind: 'session', event: sessionEvents[1] }] },
        { runId: 'run_2', events: [{ kind: 'retry', attempt: 2, delayMs: 1000, reason: 'HTTP 429: Rate limit reached', status: 429 }] },
        { runId: 'run_1', events: [{ kind: 'reasoning-delta', text: 'y' }] },
      ],
    },
  ],
  '$/progress notification': [
    { token: 'start-1', value: { kind: 'queued', position: 2 } },
    { token: 7, value: { kind: 'starting' } },
    { token: 'start-1', value: { kind: 'agent', stage: 'initializing' } },
    { token: 'start-1', value: { kind: 'ready', runId: 'run_1' } },
  ],
  'runs/list result': [{ runs: [runInfo] }],
  'daemon/gc result': [{ runsArchived: 3, runsRemoved: 1, sessionsRemoved: 0, runsStored: 100_000 }],
  'run/inspect result': [{ run: runInfo, header: { cwd: '/tmp' }, events: sessionEvents }],
  'daemon/session result': [{ header: { cwd: '/tmp' }, events: sessionEvents }],
  'daemon/status result': [
    {
      daemon: identity,
      protocolVersion: '1.0.0',
      uptimeMs: 5,
      stateDir: '/tmp/state',
      connections: 1,
      runs: { starting: 0, running: 1, settled: 0, disposed: 0 },
      providers: ['echo'],
      shuttingDown: false,
      admission: { running: 1, queued: 0, limits: { maxConcurrentRuns: 8, maxRunsPerConnection: 4, maxQueued: 64 }, byConnection: { c1: { running: 1, queued: 0, client: 'fuzz@1' } } },
      memory: { rss: 50_000_000, heapUsed: 9_000_000 },
    },
  ],
  'shutdown result': [null],
  'run/cancel result': [{}],
  'run/dispose result': [{}],
  'run/sendMessage result': [{}],
  'run/resume result': [{ runId: 'run_1', provider: 'echo', id: 'child-1', local: true, runToken: 'tok' }],
  'daemon/shutdown result': [{}],
  'daemon/cancel result': [{}],
  'daemon/ui result': [{ url: 'http://127.0.0.1:40123/?token=AbC-123_xyz' }],
  'child/interrupt result': [{}],
  'child/start result': [{ childId: 'child-1', messageId: 'msg_1' }],
  'child/send result': [{ childId: 'child-1', messageId: 'msg_2' }],
  'child/list result': [
    { entries: [], diagnostics: [] },
    { entries: [{ id: 'child-1', status: 'idle', label: 'l', hasChildren: true, parentId: 's', depth: 1 }], diagnostics: ['line 3 unreadable'] },
  ],
  'child/attach result': [{ delivered: 0 }],
  'child/report notification': [{ childId: 'child-1', parentId: 's', output: 'halfway', mode: 'quiet' }],
  'child/settled notification': [{ childId: 'child-1', parentId: 's', label: 'l', stopReason: 'completed', text: 'l finished. It left no closing message.' }],
  'tool/call params': [{ runId: 'run_1', callId: 'c1', name: 'lookup', arguments: { q: 'x' } }],
  'permission/request params': [{ runId: 'run_1', title: 'write a file', options: [{ optionId: 'a', name: 'Allow', kind: 'allow_once' }] }],
};

interface Payload {
  /** "<method> params", "<method> result" or "<method> notification". */
  readonly name: string;
  readonly schema: Schema;
  readonly validate: Validate;
}

const payloads: Payload[] = [
  ...[...WIRE.toDaemon.requests, ...WIRE.toClient.requests].flatMap((request): Payload[] => [
    { name: `${request.method} params`, schema: request.params, validate: request.checkParams },
    { name: `${request.method} result`, schema: request.result, validate: request.checkResult },
  ]),
  ...[...WIRE.toDaemon.notifications, ...WIRE.toClient.notifications].map(
    (notification): Payload => ({ name: `${notification.method} notification`, schema: notification.params, validate: notification.checkParams }),
  ),
];

// ---------------------------------------------------------------------------------------------
// Helpers

/** Calls the validator; a throw fails the property with the input that caused it. */
function outcome(validate: Validate, value: unknown): ValidationFailure | undefined {
  let failure: ValidationFailure | undefined;
  try {
    failure = validate(value);
  } catch (error) {
    throw new Error(`the validator threw ${String(error)} for ${preview(value)}`);
  }
  if (failure !== undefined) {
    expect(typeof failure.field, 'field is a string').toBe('string');
    expect(failure.field.startsWith('/'), `field ${JSON.stringify(failure.field)} starts with '/'`).toBe(true);
    expect(typeof failure.message).toBe('string');
    expect(failure.message.length).toBeGreaterThan(0);
  }
  return failure;
}

function preview(value: unknown): string {
  try {
    const s = JSON.stringify(value);
    return s === undefined ? String(value) : s.slice(0, 300);
  } catch {
    return String(value);
  }
}

/** A copy with an own, enumerable property set (works for `__proto__` and friends too). */
function withOwn(base: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...base };
  Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

function without(base: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy = { ...base };
  delete copy[key];
  return copy;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A value of a JSON type the property schema does not allow, or undefined if none is known. */
function wrongTypeFor(schema: Schema): unknown {
  const type = schema['type'];
  if (type === 'string') return 12345;
  if (type === 'number' || type === 'integer') return 'not a number';
  if (type === 'boolean') return 'true';
  if (type === 'object') return ['an', 'array'];
  if (type === 'array') return { not: 'an array' };
  if ('enum' in schema || 'const' in schema) return { surely: 'not allowed' };
  if ('oneOf' in schema) return 42;
  return undefined;
}

/** Every JSON path (as keys) to a value inside `root`, up to a bounded count. */
function paths(root: unknown, limit = 200): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = [];
  const walk = (value: unknown, at: Array<string | number>): void => {
    if (out.length >= limit) return;
    if (at.length > 0) out.push(at);
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...at, i]));
    else if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) walk(v, [...at, k]);
  };
  walk(root, []);
  return out;
}

/** A deep copy with the value at `path` replaced (or removed, for `remove`). */
function setAt(root: unknown, path: ReadonlyArray<string | number>, value: unknown, remove = false): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  if (Array.isArray(root)) {
    const copy = [...root];
    if (rest.length === 0 && remove) copy.splice(head as number, 1);
    else copy[head as number] = setAt(root[head as number], rest, value, remove);
    return copy;
  }
  const obj = root as Record<string, unknown>;
  if (rest.length === 0 && remove) return without(obj, String(head));
  return withOwn(obj, String(head), setAt(obj[String(head)], rest, value, remove));
}

function nest(value: unknown, depth: number, asArray: boolean): unknown {
  let out = value;
  for (let i = 0; i < depth; i++) out = asArray ? [out] : { n: out };
  return out;
}

/** JSON pointer escaping (RFC 6901). */
const pointerToken = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

// Random values: anything JSON-ish and JS-ish, with bounded size and depth.
const anything = fc.anything({ maxDepth: 4, maxKeys: 6, withBigInt: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withNullPrototype: true, withSparseArray: true, withBoxedValues: true });
const hugeString = fc.integer({ min: 5_000, max: 70_000 }).chain((n) => fc.constantFrom('x', 'é', '😀', '\u0000').map((c) => c.repeat(n)));
const mutationValue = fc.oneof(
  { weight: 4, arbitrary: anything },
  { weight: 1, arbitrary: hugeString },
  { weight: 1, arbitrary: fc.integer({ min: 50, max: 3000 }).map((d) => nest('deep', d, d % 2 === 0)) },
  { weight: 1, arbitrary: fc.constantFrom(Number.NaN, Infinity, -0, -1, 1.5, Number.MAX_SAFE_INTEGER + 2, '', null, [], {}) },
);

/** One mutation of a valid example: replace, remove or add at a random path. */
function mutationOf(example: unknown): fc.Arbitrary<unknown> {
  const all = paths(example);
  const pathArb = all.length > 0 ? fc.constantFrom(...all) : fc.constant([] as Array<string | number>);
  return fc.oneof(
    fc.tuple(pathArb, mutationValue).map(([path, value]) => setAt(example, path, value)),
    pathArb.map((path) => (path.length === 0 ? example : setAt(example, path, undefined, true))),
    fc.tuple(pathArb, fc.string({ maxLength: 12 }), mutationValue).map(([path, key, value]) => {
      const parentPath = path.slice(0, -1);
      let target: unknown = example;
      for (const k of parentPath) target = (target as Record<string | number, unknown>)[k];
      return isPlainObject(target) ? setAt(example, parentPath, withOwn(target, key, value)) : example;
    }),
  );
}

/** The build's validators (npm test builds first). */
const prebuilt = prebuiltValidators(new URL(`../dist/protocol/${WIRE_VALIDATORS_DIR}/`, import.meta.url));

// ---------------------------------------------------------------------------------------------

describe('wire validators', () => {
  it('have a valid example for every declared payload, and accept it', () => {
    expect(payloads.filter((p) => !examples[p.name]?.length).map((p) => p.name), 'payloads without an example').toEqual([]);
    expect(Object.keys(examples).filter((name) => !payloads.some((p) => p.name === name)), 'examples of nothing declared').toEqual([]);
    for (const payload of payloads) {
      for (const example of examples[payload.name] ?? []) {
        expect(outcome(payload.validate, example), `${payload.name} example ${preview(example)}`).toBeUndefined();
        // The wire form (a JSON round trip) is what really arrives: it is accepted too.
        expect(outcome(payload.validate, JSON.parse(JSON.stringify(example))), payload.name).toBeUndefined();
      }
    }
  });

  describe.each(payloads)('$name', ({ name: kind, schema, validate }) => {
    const kindExamples = examples[kind] ?? [];
    const properties = isPlainObject(schema['properties']) ? (schema['properties'] as Record<string, Schema>) : {};
    const required = Array.isArray(schema['required']) ? (schema['required'] as string[]) : [];
    const closed = schema['additionalProperties'] === false;

    it('random values never throw; rejections name a field', () => {
      check(`${kind} anything`, anything, (value) => {
        outcome(validate, value);
      });
      // Random JSON (what can really arrive) too, including at the top of an object.
      check(`${kind} json`, fc.jsonValue({ maxDepth: 5 }), (value) => {
        outcome(validate, value);
      });
    });

    it("the build's prebuilt validator gives the outcome of the one compiled at run time", () => {
      // Here (sources) the validators are compiled at run time; dist/ carries the build's.
      const made = prebuilt(schema);
      expect(made, `${kind}: no prebuilt validator in dist/ (run npm run build)`).toBeDefined();
      const agree = (value: unknown): void => {
        const fromBuild = made!(value) ? undefined : describeAjvError(made!.errors?.[0]);
        expect(fromBuild).toEqual(outcome(validate, value)); // fast-check prints the value on a failure
      };
      for (const example of kindExamples) {
        agree(example);
        check(`${kind} prebuilt mutation`, mutationOf(example).chain((once) => mutationOf(once)), agree);
      }
      check(`${kind} prebuilt json`, fc.jsonValue({ maxDepth: 5 }), agree);
    });

    it('mutations of a valid example never throw; rejections name a field', () => {
      for (const example of kindExamples) {
        check(`${kind} mutation`, mutationOf(example), (value) => {
          outcome(validate, value);
        });
        // Several mutations stacked.
        check(
          `${kind} mutation chain`,
          mutationOf(example).chain((once) => mutationOf(once)).chain((twice) => mutationOf(twice)),
          (value) => {
            outcome(validate, value);
          },
        );
      }
    });

    it('a dropped required field is rejected at that field', () => {
      for (const example of kindExamples.filter(isPlainObject)) {
        for (const name of required) {
          const failure = outcome(validate, without(example, name));
          expect(failure?.field, `${kind} without ${name}`).toBe(`/${name}`);
        }
      }
    });

    it('a wrong type for a property is rejected within that property', () => {
      for (const example of kindExamples.filter(isPlainObject)) {
        for (const [name, propertySchema] of Object.entries(properties)) {
          const wrong = wrongTypeFor(propertySchema);
          if (wrong === undefined) continue;
          const failure = outcome(validate, withOwn(example, name, wrong));
          expect(failure, `${kind} with ${name} = ${preview(wrong)}`).toBeDefined();
          expect(failure!.field === `/${name}` || failure!.field.startsWith(`/${name}/`), `${kind}: field ${failure!.field} for /${name}`).toBe(true);
        }
      }
    });

    it('an unknown field is rejected at that field when the payload is closed, accepted when open', () => {
      const key = fc.stringMatching(/^[A-Za-z0-9_$-]{1,16}$/).filter((k) => !Object.hasOwn(properties, k));
      for (const example of kindExamples.filter(isPlainObject)) {
        check(`${kind} extra field`, fc.tuple(key, fc.jsonValue({ maxDepth: 2 })), ([name, value]) => {
          const failure = outcome(validate, withOwn(example, name, value));
          if (closed) expect(failure?.field, `${kind} + ${name}`).toBe(`/${name}`);
          else if (Object.keys(properties).length > 0) expect(failure, `${kind} + ${name}`).toBeUndefined();
        });
      }
    });

    it('a string one past its maxLength is rejected at that field; at the bound it is accepted', () => {
      for (const example of kindExamples.filter(isPlainObject)) {
        for (const [name, propertySchema] of Object.entries(properties)) {
          const max = propertySchema['maxLength'];
          if (propertySchema['type'] !== 'string' || typeof max !== 'number' || typeof example[name] !== 'string') continue;
          const pattern = typeof propertySchema['pattern'] === 'string' ? propertySchema['pattern'] : undefined;
          // A fixed shape (a traceparent: its length is its maxLength) has no filler of any length.
          if (pattern !== undefined && pattern !== '^/') continue;
          const fill = pattern === '^/' ? (n: number) => `/${'a'.repeat(n - 1)}` : (n: number) => 'a'.repeat(n);
          expect(outcome(validate, withOwn(example, name, fill(max))), `${kind}/${name} at ${max}`).toBeUndefined();
          expect(outcome(validate, withOwn(example, name, fill(max + 1)))?.field, `${kind}/${name} at ${max + 1}`).toBe(`/${name}`);
        }
      }
    });

    it('deep nesting in any field never throws', () => {
      for (const example of kindExamples) {
        const all = paths(example);
        for (const depth of [100, 5000]) {
          for (const at of [[] as Array<string | number>, ...all.slice(0, 20)]) {
            outcome(validate, setAt(example, at, nest(1, depth, depth % 2 === 0)));
            outcome(validate, setAt(example, at, nest('x', depth, depth % 2 !== 0)));
          }
        }
      }
    });
  });
});

describe('fields are JSON pointers', () => {
  it('nested failures name the nested field', () => {
    const start = examples['subagent/start params']![0] as Record<string, unknown>;
    expect(StartRequest.checkParams({ ...start, parent: { sessionId: 's' } })?.field).toBe('/parent/cwd');
    expect(StartRequest.checkParams({ ...start, prompt: [text, { type: 'text' }] })?.field).toBe('/prompt/1/text');
    expect(StartRequest.checkParams({ ...start, env: { A: 1 } })?.field).toBe('/env/A');
  });

  // RFC 6901: "/" in a key is written "~1" and "~" is "~0". Ajv escapes the keys of instancePath
  // this way, so an unknown or missing key must be escaped the same, or `/a/b` is ambiguous.
  it('an unknown key with "/" or "~" is named with RFC 6901 escaping', () => {
    const wrong: string[] = [];
    for (const key of ['a/b', 'x~y', '~1']) {
      const atDaemon = CancelRequest.checkParams(withOwn({ runId: 'r' }, key, 1))?.field;
      const atClient = StartNotification.checkParams(withOwn({ runId: 'r', provider: 'p', id: 'i', local: false }, key, 1))?.field;
      for (const field of [atDaemon, atClient]) if (field !== `/${pointerToken(key)}`) wrong.push(`${JSON.stringify(key)} → ${String(field)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('an escaped nested path agrees with the escaped key (env key with a slash)', () => {
    const start = examples['subagent/start params']![0] as Record<string, unknown>;
    // Ajv itself names /env/a~1b for a bad value under key "a/b".
    expect(StartRequest.checkParams({ ...start, env: { 'a/b': 1 } })?.field).toBe('/env/a~1b');
  });
});

describe('the seed', () => {
  it('is printed so a failure can be reproduced', () => {
    console.log(`[fuzz-schemas] FC_SEED=${SEED}, ${NUM_RUNS} runs per property`);
    expect(Number.isInteger(SEED)).toBe(true);
  });
});
