/**
 * The faces' stdin fuzzer, beside the wire fuzzer (wire-fuzz.ts): the built `subagentd mcp` or
 * `subagentd acp` in a CliSandbox, fed seeded lines an MCP host or an editor might send by
 * mistake or malice: malformed JSON, non-objects, bad envelopes, bad ids, the face's own methods
 * with mutated params, unknown methods, responses to nothing, stray `\r`, invalid UTF-8, and
 * lines over `limits.faceLineBytes` (set low, so oversize lines are cheap). Every request line
 * with an id the face can answer must be answered, and after each batch a sync request must be:
 * a missing answer is a hang, the finding. The face must still be running at the end.
 */
import fc from 'fast-check';
import type { CliSandbox } from './cli-harness.js';
import { LinePeer } from './line-peer.js';

export type FaceKind = 'mcp' | 'acp';

export interface FaceFuzzOptions {
  readonly box: CliSandbox;
  readonly face: FaceKind;
  readonly lines: number;
  readonly seed: number;
  /** `limits.faceLineBytes` for the face (default 64 KiB, so oversize lines stay cheap). */
  readonly maxLineBytes?: number;
  /** Lines per batch between syncs (default 25). */
  readonly batch?: number;
}

export interface FaceFuzzReport {
  face: FaceKind;
  linesSent: number;
  byKind: Record<string, number>;
  /** Requests (and syncs) that got no answer: hangs. Must be empty. */
  hangs: string[];
  /** Answers to oversize lines (-32600 naming the limit). */
  oversizeAnswered: number;
  /** Whether the face was still running at the end (it must be). */
  alive: boolean;
  /** stdout lines that were not JSON (must be none). */
  garbage: number;
  /** Error answers with id null: malformed JSON (-32700) and non-objects (-32600) get one each. */
  nullIdErrors: number;
}

interface FuzzLine {
  readonly kind: string;
  readonly bytes: Buffer;
  /** The id an answer must carry, when the face must answer this line. */
  readonly answerId?: string | number | null;
}

const MCP_METHODS = ['tools/list', 'tools/call', 'ping', 'resources/list', 'prompts/list', 'logging/setLevel', 'completion/complete'];
const ACP_METHODS = ['session/new', 'session/load', 'session/prompt', 'session/set_mode', 'authenticate', 'initialize'];

const jsonValue = fc.jsonValue({ maxDepth: 3 });
const line = (kind: string, text: string | Buffer, answerId?: string | number | null): FuzzLine => ({
  kind,
  bytes: Buffer.concat([typeof text === 'string' ? Buffer.from(text) : text, Buffer.from('\n')]),
  ...(answerId !== undefined && { answerId }),
});

/** Lines for `face`, with ids drawn from `nextId` so answers can be matched. */
function fuzzLine(face: FaceKind, maxLineBytes: number, nextId: () => number): fc.Arbitrary<FuzzLine> {
  const methods = face === 'mcp' ? MCP_METHODS : ACP_METHODS;
  const method = fc.oneof(fc.constantFrom(...methods), fc.string({ maxLength: 20 }));
  const params = fc.oneof(
    fc.dictionary(fc.string({ maxLength: 8 }), jsonValue, { maxKeys: 4 }),
    fc.record({ name: fc.constantFrom('subagent', 'job_output', 'nope'), arguments: fc.dictionary(fc.constantFrom('description', 'prompt', 'job_id', 'x'), jsonValue) }),
    fc.record({ sessionId: fc.oneof(fc.string(), fc.integer()), cwd: fc.oneof(fc.constant('/tmp'), fc.string()), prompt: jsonValue, mcpServers: fc.constant([]) }),
    jsonValue,
  );
  return fc.oneof(
    // A request with a sound id: it must be answered, whatever its method and params.
    fc.tuple(method, params).map(([m, p]) => {
      const id = nextId();
      return line('request', JSON.stringify({ jsonrpc: '2.0', id, method: m, params: p }), id);
    }),
    fc.tuple(method, params).map(([m, p]) => line('notification', JSON.stringify({ jsonrpc: '2.0', method: m, params: p }))),
    // Not JSON: -32700, id null.
    fc.string({ minLength: 1, maxLength: 60 }).filter((s) => !s.includes('\n') && !isJson(s)).map((s) => line('malformed', s, null)),
    fc.constantFrom('{"jsonrpc":"2.0","id":1,"method":', '{', '[{]', '"unterminated', 'nul\u0000l').map((s) => line('malformed', s, null)),
    // JSON, not an object: -32600, id null.
    fc.oneof(fc.integer(), fc.constant(null), fc.string({ maxLength: 10 }), fc.array(jsonValue, { maxLength: 3 })).map((v) => line('non-object', JSON.stringify(v), null)),
    // Objects that are no JSON-RPC message, or carry an unusable id.
    fc.dictionary(fc.string({ maxLength: 6 }), jsonValue, { maxKeys: 3 }).map((o) => line('bad-envelope', JSON.stringify(o))),
    fc.tuple(fc.oneof(fc.constant(null), fc.double(), fc.dictionary(fc.string(), jsonValue, { maxKeys: 1 }), fc.boolean()), method).map(([id, m]) =>
      line('bad-id', JSON.stringify({ jsonrpc: '2.0', id, method: m, params: {} })),
    ),
    fc.tuple(fc.integer({ min: 1, max: 1000 }), jsonValue).map(([id, r]) => line('response', JSON.stringify({ jsonrpc: '2.0', id: 900_000 + id, result: r }))),
    // A sound request with a CR before its newline, or invalid UTF-8 inside a string.
    fc.constant(null).map(() => {
      const id = nextId();
      return line('crlf', `${JSON.stringify({ jsonrpc: '2.0', id, method: face === 'mcp' ? 'ping' : 'session/cancel-nothing', params: {} })}\r`, id);
    }),
    fc.constant(null).map(() => line('invalid-utf8', Buffer.concat([Buffer.from('{"jsonrpc":"2.0","method":"x","params":{"s":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}')]))),
    // Over the limit: -32600 for its id (written last, as the MCP SDK does), without buffering it.
    fc.integer({ min: 1, max: 3 }).map((times) => {
      const id = nextId();
      const filler = 'z'.repeat(maxLineBytes * times);
      return line('oversize', `{"method":"${face === 'mcp' ? 'tools/call' : 'session/prompt'}","params":{"x":"${filler}"},"jsonrpc":"2.0","id":${id}}`, id);
    }),
    fc.constant(line('blank', '   ')),
  );
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The face's handshake, then a request it always answers: the sync. */
async function handshake(peer: LinePeer, face: FaceKind, cwd: string): Promise<() => Promise<string | undefined>> {
  if (face === 'mcp') {
    const init = await peer.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz-host', version: '1' } });
    if (!init.result) throw new Error(`mcp initialize failed: ${JSON.stringify(init)}`);
    peer.send({ method: 'notifications/initialized' });
  } else {
    const init = await peer.request('initialize', { protocolVersion: 1, clientCapabilities: {} });
    if (!init.result) throw new Error(`acp initialize failed: ${JSON.stringify(init)}`);
  }
  return async () => {
    const method = face === 'mcp' ? 'tools/list' : 'session/new';
    const params = face === 'mcp' ? {} : { cwd, mcpServers: [] };
    try {
      const answer = await peer.request(method, params, 20_000);
      return answer.result === undefined ? `sync ${method} answered with an error: ${JSON.stringify(answer.error)}` : undefined;
    } catch (error) {
      return `sync ${method}: ${(error as Error).message.split('\n')[0]}`;
    }
  };
}

export async function runFaceFuzz(options: FaceFuzzOptions): Promise<FaceFuzzReport> {
  const { box, face } = options;
  const maxLineBytes = options.maxLineBytes ?? 64 * 1024;
  const config = box.file(`${face}-fuzz-config.json`, { limits: { faceLineBytes: maxLineBytes } });
  const script = box.file(`${face}-fuzz-child.json`, { steps: [{ text: 'fuzzed child answered', finish: 'stop' }] });
  const peer = new LinePeer(box.spawn([face, '--config', config, '--model', `scripted:${script}`], { timeoutMs: 600_000 }));
  const report: FaceFuzzReport = { face, linesSent: 0, byKind: {}, hangs: [], oversizeAnswered: 0, alive: false, garbage: 0, nullIdErrors: 0 };
  let ids = 1_000_000;
  const nextId = (): number => ids++;
  try {
    const sync = await handshake(peer, face, box.work);
    const arbitrary = fuzzLine(face, maxLineBytes, nextId);
    const batch = options.batch ?? 25;
    for (let b = 0; report.linesSent < options.lines; b++) {
      const n = Math.min(batch, options.lines - report.linesSent);
      const lines = fc.sample(arbitrary, { seed: options.seed + b, numRuns: n });
      for (const l of lines) {
        report.byKind[l.kind] = (report.byKind[l.kind] ?? 0) + 1;
        peer.write(l.bytes);
      }
      report.linesSent += n;
      const stuck = await sync();
      if (stuck) {
        report.hangs.push(`after batch ${b}: ${stuck}`);
        break;
      }
      // Every line that must be answered was answered before the sync's answer, or soon after
      // (a tools/call that started a child answers when the child ends).
      for (const l of lines) {
        if (l.answerId === undefined || l.answerId === null) continue;
        const found = await peer.answer(l.answerId, 20_000, `${l.kind} line ${String(l.answerId)}`).catch(() => undefined);
        if (!found) report.hangs.push(`${l.kind} line with id ${String(l.answerId)}: no answer`);
        else if (l.kind === 'oversize' && found.error?.code === -32600 && found.error.message.includes('limits.faceLineBytes')) report.oversizeAnswered += 1;
        else if (l.kind === 'oversize') report.hangs.push(`oversize line ${String(l.answerId)} answered ${JSON.stringify(found).slice(0, 200)}`);
      }
      if (report.hangs.length > 0) break;
    }
    report.alive = peer.face.child.exitCode === null && peer.face.child.signalCode === null;
    report.garbage = peer.garbage.length;
    report.nullIdErrors = peer.received.filter((m) => m.id === null && m.error !== undefined).length;
  } finally {
    peer.face.child.stdin.end();
    await peer.face.exited;
  }
  return report;
}
