/**
 * The structure-aware wire fuzzer, shared by the seeded CI run (test/fuzz-wire.e2e.ts) and the
 * long run (`npm run fuzz -- --frames 100000`, bench/fuzz.ts). Frames are built from the
 * protocol's own declarations (`WIRE`): every client → daemon request with params mutated from
 * a valid example, every daemon → client message and the library's `$/` ones sent
 * the wrong way, wrong ids, cancels for pending and unknown ids, responses to nothing, bodies that
 * are not JSON-RPC, framing the daemon cannot trust, and hang-ups mid-frame. Fuzz connections run
 * over unix and TCP, some initialized and some not, while a bystander and any number of load
 * clients keep doing runs. The result counts what must be zero: daemon deaths, bystander or load
 * failures, and process-level faults (unhandled rejections, uncaught exceptions) in its log.
 */
import fc from 'fast-check';
import { connect, type RemoteSubagentService } from '../../client/index.js';
import { WIRE, type ValidationFailure } from '../../protocol/index.js';
import { frame, isAlive } from './load-daemon.js';
import type { RawPeer } from './raw-peer.js';
import { initializedPeer, processFaults, rawPeer, type Transport, type WireTarget } from './wire-peers.js';

/** A client → daemon request method. */
export type Method = (typeof WIRE.toDaemon.requests)[number]['method'];
const REQUESTS = new Map(WIRE.toDaemon.requests.map((request) => [request.method, request]));
export const METHODS: Method[] = [...REQUESTS.keys()];

/** The daemon's verdict on params for a method, from the method's own declaration. */
export function checkParams(method: Method, params: unknown): ValidationFailure | undefined {
  const request = REQUESTS.get(method);
  if (!request) throw new Error(`${method} is not a declared request`);
  return request.checkParams(params);
}

const text = { type: 'text', text: 'echo fuzz' };
/** One harmless valid params object per method (shutdown: see below, it is never sent valid). */
export const EXAMPLES: Record<string, Record<string, unknown>> = {
  initialize: { protocolVersion: '1.0.0', clientInfo: { name: 'fuzz', version: '0' } },
  'providers/list': {},
  'subagent/start': { provider: 'echo', prompt: [text], parent: { sessionId: 'fuzz', cwd: '/tmp' }, stream: true },
  'run/cancel': { runId: 'run_fuzz' },
  'run/dispose': { runId: 'run_fuzz' },
  'run/wait': { runId: 'run_fuzz' },
  'run/inspect': { runId: 'run_fuzz' },
  'run/attach': { runId: 'run_fuzz', runToken: 'token' },
  'run/sendMessage': { runId: 'run_fuzz', content: [text] },
  'run/resume': { runId: 'run_fuzz', prompt: [text] },
  'runs/list': { state: 'settled' },
  'daemon/status': {},
  'daemon/session': { runId: 'run_fuzz' },
  'daemon/shutdown': { drain: 'not a boolean' },
  'daemon/cancel': { runId: 'run_fuzz', level: 'now' },
  'child/start': { ownerKey: 'fuzz-owner-key-0123456789', provider: 'echo', prompt: [text], parent: { sessionId: 'fuzz', cwd: '/tmp' } },
  'child/send': { ownerKey: 'fuzz-owner-key-0123456789', childId: 'child-fuzz', from: 'fuzz', message: [text] },
  'child/interrupt': { ownerKey: 'fuzz-owner-key-0123456789', childId: 'child-fuzz', by: 'fuzz', level: 'now' },
  'child/list': { ownerKey: 'fuzz-owner-key-0123456789', of: 'fuzz', scope: 'descendants' },
  'child/attach': { ownerKey: 'fuzz-owner-key-0123456789' },
};

export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function setAt(root: unknown, path: ReadonlyArray<string | number>, value: unknown, remove: boolean): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  // A named key on an array (e.g. "length") makes it an object: JSON would drop it anyway.
  if (Array.isArray(root) && typeof head === 'number') {
    const copy = [...root];
    if (rest.length === 0 && remove) copy.splice(head as number, 1);
    else copy[head as number] = setAt(root[head as number], rest, value, remove);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(root as Record<string, unknown>) };
  if (rest.length === 0 && remove) delete copy[String(head)];
  else Object.defineProperty(copy, String(head), { value: setAt(copy[String(head)], rest, value, remove), enumerable: true, writable: true, configurable: true });
  return copy;
}

function paths(root: unknown): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = [];
  const walk = (value: unknown, at: Array<string | number>): void => {
    out.push(at);
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...at, i]));
    else if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) walk(v, [...at, k]);
  };
  walk(root, []);
  return out;
}

const nested = (depth: number): unknown => {
  let v: unknown = 'deep';
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { d: v };
  return v;
};

export const fuzzValue = fc.oneof(
  { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 70_000 }).map((n) => 'z'.repeat(n)) },
  { weight: 1, arbitrary: fc.integer({ min: 10, max: 200 }).map(nested) },
  { weight: 2, arbitrary: fc.constantFrom(-1, 1.5, 1e308, Number.MAX_SAFE_INTEGER + 2, '', '/', 'spawn', 'fork', 'bare', 'nope', [], {}, null, true) },
);

/** Fuzzed params for one method: mutations of its example, or any JSON object. */
export function paramsFor(method: Method): fc.Arbitrary<Record<string, unknown>> {
  const example = EXAMPLES[method]!;
  const all = paths(example);
  const at = fc.constantFrom(...all);
  const mutate = fc.oneof(
    fc.tuple(at, fuzzValue).map(([p, v]) => setAt(example, p, v, false)),
    at.map((p) => (p.length === 0 ? example : setAt(example, p, undefined, true))),
    fc.tuple(at, fc.string({ maxLength: 10 }), fuzzValue).map(([p, key, v]) => setAt(example, [...p.filter((_, i) => i < p.length - 1), key], v, false)),
  );
  const anyObject = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
  return fc.oneof({ weight: 5, arbitrary: mutate }, { weight: 1, arbitrary: anyObject }).filter(isPlainObject);
}

/** Schema-valid starts with odd values, to reach the service's own checks (depth, capabilities, schema subset). */
const oddNumber = fc.constantFrom(0, 1, 2, 7, 1.5, -1, -0.5, 1e21, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, 2 ** 31);
export const semanticStart: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    provider: fc.constantFrom('echo', 'bare', 'spawn', 'fork', 'nope'),
    prompt: fc.array(fc.oneof(fc.string({ maxLength: 20 }).map((t) => ({ type: 'text', text: `echo ${t}` })), fc.constant({ type: 'image', data: 'AAAA', mimeType: 'image/png' })), { maxLength: 3 }),
    parent: fc.record(
      {
        sessionId: fc.string({ minLength: 1, maxLength: 10 }),
        cwd: fc.constantFrom('/tmp', '/', '/nonexistent/dir', '/proc/self', '/tmp/../tmp'),
        delegationDepth: oddNumber,
        subagentDepth: oddNumber,
      },
      { requiredKeys: ['sessionId', 'cwd'] },
    ),
    maxDepth: oddNumber,
    agentOptions: fc.record({ subagentDepth: oddNumber, model: fc.constantFrom('nope', 'scripted:relative.json', 'scripted:/nonexistent.json') }, { requiredKeys: [] }),
    outputSchema: fc.constantFrom<Record<string, unknown>>(
      { type: 'object' },
      { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
      { type: 'object', properties: { a: { $ref: '#' } } },
      { type: 'object', patternProperties: {} },
      { oneOf: [{ type: 'object' }, { type: 'object' }] },
      { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'array', items: { enum: [1, 'x', null] } } } } } },
      { type: ['object', 'null'] },
    ),
    toolFilter: fc.oneof(fc.constant({ allow: [] }), fc.constant({ deny: ['read_file'] }), fc.constant({ allow: ['no_such_tool'] })),
    persona: fc.string({ maxLength: 30 }),
    tools: fc.constantFrom(
      [{ name: 'lookup', description: 'd', inputSchema: { type: 'object' } }],
      [{ name: 'dup', description: 'd', inputSchema: { type: 'object' } }, { name: 'dup', description: 'd', inputSchema: { type: 'object' } }],
      [{ name: 'weird', description: 'd', inputSchema: { type: 'object', properties: { x: { type: 'nonsense' } } } }],
    ),
    env: fc.dictionary(fc.stringMatching(/^[A-Z_]{1,8}$/), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
    stream: fc.boolean(),
  },
  { requiredKeys: ['provider', 'prompt', 'parent'] },
);

/** Fixture prompts that would wait forever (for a sendMessage, a client tool, a long timer). */
export const BLOCKING = new Set(['hang', 'steer', 'tool', 'slow-start', 'stream']);

/** Keeps a fuzzed start harmless: no prompt that blocks, no real shutdown. */
export function defuse(method: Method, params: Record<string, unknown>): Record<string, unknown> {
  if (method === 'subagent/start' && Array.isArray(params['prompt'])) {
    const prompt = params['prompt'].map((block: unknown) =>
      isPlainObject(block) && typeof block['text'] === 'string' && BLOCKING.has(block['text'].split(' ')[0] ?? '') ? { ...block, text: `echo ${block['text']}` } : block,
    );
    return { ...params, prompt };
  }
  return params;
}


// ---------------------------------------------------------------------------------------------
// Frames

/** Notifications the daemon sends (a client sending them is wrong) and the library's own. */
export const NOTIFICATIONS = [
  ...[...WIRE.toClient.notifications, ...WIRE.toClient.requests].map((message) => message.method),
  '$/cancelRequest',
  '$/setTrace',
  '$/logTrace',
];

/** Ids a fuzz connection uses, few enough that cancels and responses often name a pending one. */
const goodId = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 40 }).map((n) => `fz-${n}`));
const badId = fc.constantFrom<unknown>(null, 1.5, -0.25, { id: 1 }, [1], true, false, 2 ** 60, -1e300, Number.MAX_SAFE_INTEGER + 2);
const anyParams = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], [1, 'x'], null, 7, 'params', true) },
);

export type FrameKind =
  | 'params'
  | 'notification'
  | 'bad-id'
  | 'cancel'
  | 'start-then-cancel'
  | 'response'
  | 'body'
  | 'fatal';

export interface FuzzFrame {
  readonly kind: FrameKind;
  readonly bytes: Buffer;
  /** Frames in `bytes` (a start and its cancel are two). */
  readonly frames: number;
}

const one = (kind: FrameKind, message: unknown): FuzzFrame => ({ kind, bytes: frame(message), frames: 1 });

/** A valid envelope with fuzzed params for a request method; never a valid `daemon/shutdown`. */
const paramsFrame: fc.Arbitrary<FuzzFrame> = fc
  .constantFrom(...METHODS)
  .chain((method) => fc.tuple(fc.constant(method), paramsFor(method), goodId))
  .filter(([method, params]) => method !== 'daemon/shutdown' || checkParams('daemon/shutdown', params) !== undefined)
  .map(([method, params, id]) => one('params', { jsonrpc: '2.0', id, method, params: defuse(method, params) }));

/** Any method, no id: request methods as notifications, the daemon's own notifications, `$/`. */
const notificationFrame: fc.Arbitrary<FuzzFrame> = fc
  .tuple(fc.constantFrom(...METHODS.filter((m) => m !== 'daemon/shutdown'), ...NOTIFICATIONS), fc.option(anyParams, { nil: undefined }))
  .map(([method, params]) => one('notification', { jsonrpc: '2.0', method, ...(params !== undefined && { params }) }));

const badIdFrame: fc.Arbitrary<FuzzFrame> = fc
  .tuple(fc.constantFrom(...METHODS.filter((m) => m !== 'daemon/shutdown')), badId)
  .map(([method, id]) => one('bad-id', { jsonrpc: '2.0', id, method, params: EXAMPLES[method] }));

const cancelFrame: fc.Arbitrary<FuzzFrame> = fc
  .oneof(
    goodId.map((id) => ({ id })),
    badId.map((id) => ({ id })),
    fc.constantFrom<unknown>({}, [], [1], null, 'x', undefined),
  )
  .map((params) => one('cancel', { jsonrpc: '2.0', method: '$/cancelRequest', ...(params !== undefined && { params }) }));

/** A start and at once a cancel of it: the cancel is for a pending id. */
const startThenCancel: fc.Arbitrary<FuzzFrame> = goodId.map((id) => ({
  kind: 'start-then-cancel',
  bytes: Buffer.concat([
    frame({ jsonrpc: '2.0', id, method: 'subagent/start', params: EXAMPLES['subagent/start'] }),
    frame({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } }),
  ]),
  frames: 2,
}));

/** Responses to nothing (the daemon asked no question), well- and ill-formed. */
const responseFrame: fc.Arbitrary<FuzzFrame> = fc
  .tuple(
    fc.oneof(goodId, badId),
    fc.oneof(
      fc.jsonValue({ maxDepth: 2 }).map((result) => ({ result })),
      fc.record({ code: fc.integer(), message: fc.string({ maxLength: 20 }) }).map((error) => ({ error })),
      fc.constantFrom<Record<string, unknown>>({ result: 1, error: { code: 1, message: 'both' } }, { error: null }, { error: 5 }, { error: { code: 'x' } }, {}),
    ),
  )
  .map(([id, body]) => one('response', { jsonrpc: '2.0', id, ...body }));

/** Sound framing around a body that is not a JSON-RPC message. */
const bodyFrame: fc.Arbitrary<FuzzFrame> = fc
  .oneof(
    fc.uint8Array({ maxLength: 120 }).map((b) => Buffer.from(b)),
    fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
    fc.string({ maxLength: 60 }).map((s) => Buffer.from(`{"jsonrpc":"2.0",${s}`)),
  )
  .map((body) => ({ kind: 'body', bytes: frame(body), frames: 1 }));

/** Framing the daemon cannot trust: it answers "closing: …" and closes the connection. */
const fatalFrame: fc.Arbitrary<FuzzFrame> = fc
  .constantFrom('Content-Length: lots\r\n\r\n', 'no header at all\r\n\r\n', 'Content-Length: 99999999999\r\n\r\n', 'Content-Type: x\r\n\r\n{}')
  .map((text) => ({ kind: 'fatal', bytes: Buffer.from(text), frames: 1 }));

// A fatal frame ends its connection: rare enough that most connections live for several batches.
export const fuzzFrame: fc.Arbitrary<FuzzFrame> = fc.oneof(
  { weight: 150, arbitrary: paramsFrame },
  { weight: 50, arbitrary: notificationFrame },
  { weight: 40, arbitrary: badIdFrame },
  { weight: 50, arbitrary: cancelFrame },
  { weight: 30, arbitrary: startThenCancel },
  { weight: 50, arbitrary: responseFrame },
  { weight: 30, arbitrary: bodyFrame },
  { weight: 1, arbitrary: fatalFrame },
);

// ---------------------------------------------------------------------------------------------
// The run

export interface FuzzOptions {
  readonly target: WireTarget;
  readonly pid: number;
  readonly stderr: () => string;
  readonly frames: number;
  readonly seed: number;
  /** Fuzz connections at once (default 4), alternating unix/TCP and initialized/not. */
  readonly connections?: number;
  /** Frames written before each round trip that checks the connection still answers (default 40). */
  readonly batch?: number;
  /** Load clients doing `runsPerClient` echo runs each while the fuzz runs (default 0). */
  readonly loadClients?: number;
  readonly runsPerClient?: number;
  readonly onProgress?: (sent: number) => void;
}

export interface FuzzReport {
  framesSent: number;
  byKind: Record<string, number>;
  connections: number;
  /** Connections the daemon closed, by its farewell ("closing: …") reason, digits elided. */
  closedByDaemon: Record<string, number>;
  hangUps: number;
  bystanderRuns: number;
  bystanderFailures: string[];
  loadCompleted: number;
  loadFailures: string[];
  daemonDeaths: number;
  processFaults: string[];
  unanswered: string[];
}

const parent = { sessionId: 'fuzz-load', cwd: '/tmp' };

/** One echo run, start to disposed; throws unless it completed with its own prompt. */
async function echoRun(client: RemoteSubagentService, prompt: string): Promise<void> {
  const run = await client.start('echo', { prompt: [{ type: 'text', text: prompt }], parent, signal: AbortSignal.timeout(30_000) });
  try {
    const result = await run.result;
    const first = result.output[0];
    if (result.stopReason !== 'completed' || first?.type !== 'text' || first.text !== prompt) {
      throw new Error(`run ended ${result.stopReason}: ${JSON.stringify(result.output).slice(0, 200)}`);
    }
  } finally {
    await run.dispose();
  }
}

export async function runWireFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const report: FuzzReport = {
    framesSent: 0,
    byKind: {},
    connections: 0,
    closedByDaemon: {},
    hangUps: 0,
    bystanderRuns: 0,
    bystanderFailures: [],
    loadCompleted: 0,
    loadFailures: [],
    daemonDeaths: 0,
    processFaults: [],
    unanswered: [],
  };
  const clientOptions = (name: string) => ({ socket: options.target.socket, clientInfo: { name, version: '0' }, requestTimeoutMs: 30_000, logger: { error: () => undefined } });
  const bystander = await connect(clientOptions('fuzz-bystander'));
  let fuzzing = true;
  const bystanding = (async () => {
    while (fuzzing && report.bystanderFailures.length === 0) {
      await echoRun(bystander, `echo bystander ${report.bystanderRuns}`).then(
        () => void (report.bystanderRuns += 1),
        (error: unknown) => void report.bystanderFailures.push(String(error)),
      );
    }
  })();
  const load = Array.from({ length: options.loadClients ?? 0 }, async (_, c) => {
    const client = await connect(clientOptions(`fuzz-load-${c}`)).catch((error: unknown) => void report.loadFailures.push(String(error)));
    if (!client) return;
    try {
      for (let r = 0; r < (options.runsPerClient ?? 0); r++) {
        await echoRun(client, `echo load ${c}.${r}`).then(
          () => void (report.loadCompleted += 1),
          (error: unknown) => void report.loadFailures.push(String(error)),
        );
      }
    } finally {
      await client.close();
    }
  });

  let budget = options.frames;
  const take = (n: number): number => {
    const granted = Math.min(n, budget);
    budget -= granted;
    return granted;
  };
  const workers = Array.from({ length: options.connections ?? 4 }, (_, w) => fuzzConnection(w, options, report, take));
  await Promise.all(workers);
  fuzzing = false;
  await Promise.all([bystanding, ...load]);
  await bystander.close();
  // A daemon that exits in order after a fault may still be alive for a moment: it must also answer.
  const answers = await rawPeer(options.target, 'unix').then(
    (peer) => (peer.close(), true),
    () => false,
  );
  if (!isAlive(options.pid) || !answers) report.daemonDeaths = 1;
  report.processFaults = processFaults(options.stderr());
  return report;
}

/** One fuzz worker: connection after connection until the frame budget is spent. */
async function fuzzConnection(worker: number, options: FuzzOptions, report: FuzzReport, take: (n: number) => number): Promise<void> {
  const batch = options.batch ?? 40;
  for (let round = 0; ; round++) {
    const transport: Transport = (worker + round) % 2 === 0 ? 'unix' : 'tcp';
    const initialize = Math.floor((worker + round) / 2) % 2 === 0;
    let peer: RawPeer;
    try {
      peer = initialize ? await initializedPeer(options.target, transport, `fuzz-${worker}`) : await rawPeer(options.target, transport);
    } catch (error) {
      // A dead daemon is the finding, reported by the caller; anything else is a real failure.
      report.unanswered.push(`${transport}: cannot connect: ${(error as Error).message}`);
      return;
    }
    report.connections += 1;
    let sync = 0;
    try {
      // A connection lives for a few batches, then hangs up (mid-frame half of the time).
      for (let b = 0; b < 8; b++) {
        const n = take(batch);
        if (n === 0) return;
        const seed = options.seed + worker * 1_000_003 + report.connections * 1009 + b;
        const frames = fc.sample(fuzzFrame, { seed, numRuns: n });
        for (const f of frames) report.byKind[f.kind] = (report.byKind[f.kind] ?? 0) + f.frames;
        report.framesSent += frames.reduce((sum, f) => sum + f.frames, 0);
        options.onProgress?.(report.framesSent);
        peer.writeRaw(Buffer.concat(frames.map((f) => f.bytes)));
        if (frames.some((f) => f.kind === 'fatal')) {
          await Promise.race([peer.whenClosed, new Promise((r) => setTimeout(r, 10_000))]);
          if (!peer.closed) report.unanswered.push(`${transport}: a fatal frame did not close the connection`);
          else countClosing(report, peer);
          break;
        }
        const id = `sync-${worker}-${sync++}`;
        peer.send({ jsonrpc: '2.0', id, method: 'daemon/status', params: {} });
        const answered = await peer.waitFor((m) => m.id === id && m.method === undefined, 20_000, id).then(
          () => true,
          () => false,
        );
        if (!answered) {
          if (peer.closed) countClosing(report, peer);
          else report.unanswered.push(`${transport}${initialize ? ' (initialized)' : ''}: no answer to ${id}`);
          break;
        }
      }
      if (!peer.closed) {
        report.hangUps += 1;
        if (round % 2 === 0) peer.writeRaw(frame({ jsonrpc: '2.0', id: 'cut', method: 'subagent/start', params: EXAMPLES['subagent/start'] }).subarray(0, 30));
      }
    } finally {
      peer.close();
    }
  }
}

function countClosing(report: FuzzReport, peer: RawPeer): void {
  const farewell = peer.messages.find((m) => m.id === null && m.error?.message.startsWith('closing: '));
  const reason = farewell?.error?.message.slice('closing: '.length).replace(/\d+/g, 'N').slice(0, 60) ?? 'closed without a reason';
  report.closedByDaemon[reason] = (report.closedByDaemon[reason] ?? 0) + 1;
}
