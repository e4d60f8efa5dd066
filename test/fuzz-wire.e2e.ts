/**
 * Wire fuzzing against one real daemon process: ~300 random and mutated JSON-RPC messages on one
 * initialized raw connection — valid envelopes with fuzzed params for every method, broken
 * envelopes, and random bytes inside sound frames — then garbage framing on fresh connections.
 * Every request with a valid id gets an answer (a result or a JSON-RPC error; never silence,
 * never an internal error); params the protocol's validator rejects are INVALID_REQUEST naming
 * the validator's field; every run the fuzz managed to start still ends; the daemon survives and
 * a fresh client completes runs afterwards. The MCP and ACP faces' stdin is fuzzed too
 * (support/face-fuzz.ts): malformed, non-object and oversize lines, 0 hangs.
 *
 * Deterministic per seed: FC_SEED overrides it; it is printed on failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../client/index.js';
import { isSubagentErrorCode } from '../protocol/index.js';
import { frame, isAlive, pollUntil, startLoadDaemon, writeScript, type LoadDaemon } from './support/load-daemon.js';
import { RawPeer, type RpcMessage } from './support/raw-peer.js';
import { checkParams, defuse, EXAMPLES, METHODS, paramsFor, runWireFuzz, semanticStart, type Method } from './support/wire-fuzz.js';
import { tcpConfig, type WireTarget } from './support/wire-peers.js';
import { CliSandbox } from './support/cli-harness.js';
import { runFaceFuzz } from './support/face-fuzz.js';

const SEED = process.env['FC_SEED'] !== undefined ? Number(process.env['FC_SEED']) : Date.now() % 2_147_483_647;
const MAX_DEPTH = 64; // the guarded reader's default nesting limit

let daemon: LoadDaemon;
let peer: RawPeer;
const figures: string[] = [];

beforeAll(async () => {
  daemon = await startLoadDaemon({ detachGraceMs: 0 });
  peer = await RawPeer.initialized(daemon.socket, 'fuzzer');
});

afterAll(async () => {
  peer?.close();
  await daemon?.stop();
  if (figures.length > 0) console.log(`[fuzz-wire] FC_SEED=${SEED}\n  ${figures.join('\n  ')}`);
});

/** Runs a block; on failure the seed is printed so the run can be replayed. */
async function withSeed<T>(name: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    console.log(`[fuzz-wire] "${name}" failed; reproduce with FC_SEED=${SEED}`);
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// What to send

function depthExceeds(root: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > max) return true;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return false;
}

interface Sent {
  readonly id: string | number;
  readonly method: string;
  readonly message: Record<string, unknown>;
  /** What the answer must be, when the test can know it. */
  readonly expect: (reply: RpcMessage) => void;
}

const noInternalError = (reply: RpcMessage): void => {
  if (reply.error) {
    expect(reply.error.code, `internal error: ${reply.error.message}`).not.toBe(-32603);
    expect(typeof reply.error.message).toBe('string');
    if (reply.error.data?.code !== undefined) expect(isSubagentErrorCode(reply.error.data.code), String(reply.error.data.code)).toBe(true);
  } else {
    expect('result' in reply, 'a reply has a result or an error').toBe(true);
  }
};

/** A request with fuzzed params; its expected answer follows from the protocol's own validator. */
function fuzzedRequest(method: Method, rawParams: Record<string, unknown>, id: string | number): Sent | undefined {
  const params = JSON.parse(JSON.stringify(defuse(method, rawParams))) as Record<string, unknown>;
  const message = { jsonrpc: '2.0', id, method, params };
  const invalid = checkParams(method, params);
  // A valid shutdown would end the daemon under test: never sent.
  if (method === 'daemon/shutdown' && !invalid) return undefined;
  if (depthExceeds(message, MAX_DEPTH)) {
    return { id, method, message, expect: (reply) => expect(reply.error?.code).toBe(-32600) };
  }
  return {
    id,
    method,
    message,
    expect: (reply) => {
      noInternalError(reply);
      if (invalid) {
        expect(reply.error, `${method} ${JSON.stringify(params).slice(0, 200)} must be refused at ${invalid.field}`).toBeDefined();
        expect(reply.error?.code).toBe(-32602);
        expect(reply.error?.data).toMatchObject({ code: 'INVALID_REQUEST', field: invalid.field });
      }
    },
  };
}

/** Broken envelopes with a sound frame: each is answered, with the id only when it is well-formed. */
function envelopeCases(seed: number): Sent[] {
  const sample = <T>(arb: fc.Arbitrary<T>, n: number, offset: number): T[] => fc.sample(arb, { seed: seed + offset, numRuns: n });
  const out: Sent[] = [];
  let n = 0;
  const idNull = (reply: RpcMessage): void => {
    expect(reply.id).toBeNull();
    expect(reply.error?.code).toBe(-32600);
  };
  // Malformed ids: answered with id null (they cannot be echoed).
  for (const badId of [{ x: 1 }, [1], true, 1.5, Number.MAX_SAFE_INTEGER + 10, -1e300]) {
    out.push({ id: `null-${n++}`, method: 'daemon/status', message: { jsonrpc: '2.0', id: badId, method: 'daemon/status', params: {} }, expect: idNull });
  }
  // Wrong or missing jsonrpc, bad method, primitive params: -32600 echoing the id.
  const echoed = (code: number) => (reply: RpcMessage) => expect(reply.error?.code).toBe(code);
  const bad: Array<[Record<string, unknown>, number]> = [
    [{ jsonrpc: '1.0', method: 'daemon/status', params: {} }, -32600],
    [{ method: 'daemon/status', params: {} }, -32600],
    [{ jsonrpc: 2, method: 'daemon/status', params: {} }, -32600],
    [{ jsonrpc: '2.0', method: '', params: {} }, -32600],
    [{ jsonrpc: '2.0', method: 7, params: {} }, -32600],
    [{ jsonrpc: '2.0' }, -32600],
    [{ jsonrpc: '2.0', method: 'daemon/status', params: 'x' }, -32600],
    [{ jsonrpc: '2.0', method: 'run/cancel', params: 42 }, -32600],
    [{ jsonrpc: '2.0', method: 'run/cancel', params: null }, -32600],
    [{ jsonrpc: '2.0', method: 'run/cancel', params: true }, -32600],
  ];
  for (const [body, code] of bad) {
    const id = 500_000 + n++;
    out.push({ id, method: String(body['method']), message: { ...body, id }, expect: echoed(code) });
  }
  // Unknown methods: -32601.
  for (const method of sample(fc.string({ minLength: 1, maxLength: 30 }).filter((m) => !m.startsWith('$/') && !METHODS.includes(m)), 12, 1)) {
    const id = `unknown-${n++}`;
    out.push({ id, method, message: { jsonrpc: '2.0', id, method, params: {} }, expect: echoed(-32601) });
  }
  // Positional params (arrays) and omitted params: answered, one way or another.
  for (const method of METHODS.filter((m) => m !== 'daemon/shutdown')) {
    for (const params of [[], [EXAMPLES[method]], [EXAMPLES[method], 1, 'x']]) {
      const id = `positional-${n++}`;
      out.push({ id, method, message: { jsonrpc: '2.0', id, method, params }, expect: (reply) => expect(reply.result !== undefined || reply.error !== undefined).toBe(true) });
    }
    const id = `omitted-${n++}`;
    out.push({ id, method, message: { jsonrpc: '2.0', id, method }, expect: (reply) => expect(reply.result !== undefined || reply.error !== undefined).toBe(true) });
  }
  return out;
}

async function sendAll(target: RawPeer, messages: Sent[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 20) {
    target.writeRaw(Buffer.concat(messages.slice(i, i + 20).map((m) => frame(m.message))));
    await new Promise((r) => setTimeout(r, 2));
  }
}

// ---------------------------------------------------------------------------------------------

describe('fuzzed JSON-RPC at a real daemon', () => {
  it('answers every request with a valid id, refuses invalid params at the validator’s field, and ends every run it started', async () => {
    await withSeed('requests', async () => {
      const perMethod = Math.ceil(160 / METHODS.length);
      const requests: Sent[] = [];
      METHODS.forEach((method, m) => {
        const samples = fc.sample(paramsFor(method), { seed: SEED + m, numRuns: perMethod });
        samples.forEach((params, i) => {
          const id = (m + i) % 2 === 0 ? 1000 + m * 100 + i : `fz-${method}-${i}`;
          const sent = fuzzedRequest(method, params, id);
          if (sent) requests.push(sent);
        });
      });
      fc.sample(semanticStart, { seed: SEED + 500, numRuns: 60 }).forEach((params, i) => {
        const sent = fuzzedRequest('subagent/start', params, `semantic-${i}`);
        if (sent) requests.push(sent);
      });
      const envelopes = envelopeCases(SEED);
      // The malformed-id cases are answered with id null, so they are counted, not matched.
      const byId = [...requests, ...envelopes.filter((e) => !String(e.id).startsWith('null-'))];
      const nullIdCases = envelopes.filter((e) => String(e.id).startsWith('null-'));
      const nullBefore = peer.messages.filter((m) => m.id === null).length;

      await sendAll(peer, [...requests, ...envelopes]);
      const ids = new Set(byId.map((s) => s.id));
      const answered = (): number => peer.messages.filter((m) => m.method === undefined && m.id !== null && m.id !== undefined && ids.has(m.id)).length;
      await pollUntil(answered, (n) => n >= ids.size, 20_000, `answers to ${ids.size} requests`).catch((error: unknown) => {
        const missing = byId.filter((s) => !peer.messages.some((m) => m.id === s.id && m.method === undefined));
        throw new Error(`${(error as Error).message}\nunanswered: ${missing.slice(0, 10).map((s) => JSON.stringify(s.message).slice(0, 200)).join('\n')}`);
      });

      for (const sent of byId) {
        const replies = peer.messages.filter((m) => m.id === sent.id && m.method === undefined);
        expect(replies, `exactly one answer to ${JSON.stringify(sent.message).slice(0, 200)}`).toHaveLength(1);
        try {
          sent.expect(replies[0]!);
        } catch (error) {
          throw new Error(`${(error as Error).message}\n  sent: ${JSON.stringify(sent.message).slice(0, 400)}\n  got: ${JSON.stringify(replies[0]).slice(0, 400)}`);
        }
      }
      const nullReplies = peer.messages.filter((m) => m.id === null).slice(nullBefore);
      expect(nullReplies.length).toBe(nullIdCases.length);
      for (const reply of nullReplies) nullIdCases[0]!.expect(reply);

      // Every start the fuzz got through is a real run, and every one of them ends.
      const startedRuns = byId
        .filter((s) => s.method === 'subagent/start')
        .map((s) => peer.messages.find((m) => m.id === s.id && m.method === undefined)?.result as { runId?: string } | undefined)
        .flatMap((r) => (r?.runId ? [r.runId] : []));
      await pollUntil(
        () => new Set(peer.notifications('subagent/end').map((m) => (m.params as { runId: string }).runId)),
        (ended) => startedRuns.every((r) => ended.has(r)),
        10_000,
        `subagent/end for the ${startedRuns.length} fuzzed runs that started`,
      );
      expect(peer.closed, 'sound frames never close the connection').toBe(false);

      const errors = new Map<number, number>();
      for (const sent of byId) {
        const code = peer.messages.find((m) => m.id === sent.id && m.method === undefined)?.error?.code ?? 0;
        errors.set(code, (errors.get(code) ?? 0) + 1);
      }
      figures.push(
        `${requests.length} fuzzed-params requests over ${METHODS.length} methods + ${envelopes.length} broken envelopes; ` +
          `${startedRuns.length} runs started and ended; answers by code: ${[...errors].sort((a, b) => a[0] - b[0]).map(([c, k]) => `${c === 0 ? 'result' : c}×${k}`).join(' ')}`,
      );
    });
  }, 30_000);

  it('answers random bytes in sound frames with one error each, id null, and keeps the connection', async () => {
    await withSeed('frames', async () => {
      const bodies = fc.sample(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
          fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
          fc.string({ maxLength: 100 }).map((s) => Buffer.from(`{"jsonrpc":"2.0",${s}`)),
        ),
        { seed: SEED + 1000, numRuns: 60 },
      );
      const before = peer.messages.filter((m) => m.id === null).length;
      peer.writeRaw(Buffer.concat(bodies.map((b) => frame(b))));
      await pollUntil(() => peer.messages.filter((m) => m.id === null).length - before, (n) => n >= bodies.length, 10_000, `${bodies.length} errors`);
      await new Promise((r) => setTimeout(r, 200));
      const replies = peer.messages.filter((m) => m.id === null).slice(before);
      expect(replies).toHaveLength(bodies.length);
      for (const reply of replies) expect([-32700, -32600]).toContain(reply.error?.code);
      expect(peer.closed).toBe(false);
      expect((await peer.request('providers/list', {})).result).toBeDefined();
      figures.push(`${bodies.length} random frame bodies: ${replies.filter((r) => r.error?.code === -32700).length} parse errors, ${replies.filter((r) => r.error?.code === -32600).length} invalid requests`);
    });
  }, 20_000);

  it('closes a connection whose framing is garbage, saying why, and only that one', async () => {
    await withSeed('garbage', async () => {
      const garbage = fc.sample(fc.uint8Array({ minLength: 0, maxLength: 300 }), { seed: SEED + 2000, numRuns: 8 }).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('\r\n\r\n')]));
      garbage.push(Buffer.alloc(9000, 0x61)); // a header block that never ends
      for (const bytes of garbage) {
        const victim = await RawPeer.connect(daemon.socket);
        victim.writeRaw(bytes);
        await Promise.race([victim.whenClosed, new Promise((r) => setTimeout(r, 5000))]);
        expect(victim.closed, `closed after ${JSON.stringify(bytes.subarray(0, 40).toString('latin1'))}`).toBe(true);
        expect(victim.messages.find((m) => m.id === null)?.error?.message).toMatch(/^closing: /);
        victim.close();
      }
      expect(peer.closed).toBe(false);
      figures.push(`${garbage.length} garbage-framed connections closed with a reason`);
    });
  }, 20_000);

  it('leaves the daemon alive and serving: a fresh client completes an echo run and a spawn run', async () => {
    expect(isAlive(daemon.pid)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'subagentd-fuzz-wire-'));
    try {
      const script = writeScript(dir, 'after', { steps: [{ text: 'still fine', finish: 'stop' }] });
      const client = await connect({ socket: daemon.socket, clientInfo: { name: 'after-fuzz', version: '0' }, requestTimeoutMs: 5000 });
      try {
        const echo = await client.start('echo', { prompt: [{ type: 'text', text: 'echo after' }], parent: { sessionId: 'a', cwd: '/tmp' }, signal: AbortSignal.timeout(10_000) });
        expect(await echo.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'echo after' }] });
        const spawned = await client.start('spawn', {
          prompt: [{ type: 'text', text: 'anything' }],
          parent: { sessionId: 'a', cwd: dir },
          agentOptions: { model: `scripted:${script}` },
          signal: AbortSignal.timeout(10_000),
        });
        expect(await spawned.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'still fine' }] });
        const status = await client.ops.status();
        expect(status.runs.starting).toBe(0);
        expect(status.admission.queued).toBe(0);
      } finally {
        await client.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);
});

describe('params that are not a named-params object', () => {
  // Every subagentd method takes its params by name. vscode-jsonrpc spreads an array into the
  // handler's arguments, so the first element is taken as the params and the second lands where
  // the CancellationToken goes ([] makes the token itself the params).
  it('positional (array) params are refused as invalid params, never an internal error or a leak of internals', async () => {
    const cases: Array<[string, unknown[]]> = [
      ['daemon/status', []],
      ['daemon/status', [{}, 'x']],
      ['run/wait', [{ runId: 'run_x' }, 1]],
      ['providers/list', [{}, {}]],
    ];
    const wrong: string[] = [];
    for (const [method, params] of cases) {
      const reply = await peer.request(method, params);
      const ok =
        reply.error !== undefined &&
        [-32600, -32602].includes(reply.error.code) &&
        reply.error.data?.field !== '/_isCancelled' &&
        !/onCancellationRequested/.test(reply.error.message);
      if (!ok) wrong.push(`${method} ${JSON.stringify(params)} → ${JSON.stringify(reply.error ?? reply.result).slice(0, 200)}`);
    }
    expect(wrong).toEqual([]);
  });

  // JSON-RPC 2.0: "params … MAY be omitted". A method whose params are all optional works
  // without them; one with required params says which field is missing, in the daemon's format.
  it('omitted params are answered like params {}', async () => {
    const wrong: string[] = [];
    for (const method of ['daemon/status', 'providers/list', 'runs/list']) {
      const reply = await peer.request(method);
      if (reply.error !== undefined || reply.result === undefined) wrong.push(`${method} → ${JSON.stringify(reply.error)}`);
    }
    const cancel = await peer.request('run/cancel');
    if (cancel.error?.data?.code !== 'INVALID_REQUEST' || cancel.error.data.field !== '/runId') {
      wrong.push(`run/cancel → ${JSON.stringify(cancel.error)} (expected INVALID_REQUEST at /runId)`);
    }
    expect(wrong).toEqual([]);
  });
});

describe('structure-aware frame fuzzing, seeded (npm run fuzz runs the long version)', () => {
  const FRAMES = 10_000;
  let fuzzed: LoadDaemon;
  let target: WireTarget;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subagentd-fuzz-frames-'));
    const tcp = await tcpConfig(dir);
    fuzzed = await startLoadDaemon({ detachGraceMs: 0, tcp });
    target = { socket: fuzzed.socket, port: tcp.port };
  });

  afterAll(async () => {
    await fuzzed?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${FRAMES} frames over unix and TCP, before and after initialize, with 20 clients × 50 runs: 0 deaths, 1000/1000 runs, 0 process faults`, async () => {
    const report = await withSeed('frames', () =>
      runWireFuzz({ target, pid: fuzzed.pid, stderr: () => fuzzed.stderr(), frames: FRAMES, seed: SEED, loadClients: 20, runsPerClient: 50 }),
    );
    figures.push(`frame fuzz: ${JSON.stringify({ ...report, processFaults: report.processFaults.length })}`);
    expect(report.framesSent).toBeGreaterThanOrEqual(FRAMES);
    expect(report.daemonDeaths).toBe(0);
    expect(report.processFaults).toEqual([]);
    expect(report.unanswered).toEqual([]);
    expect(report.bystanderFailures).toEqual([]);
    expect(report.bystanderRuns).toBeGreaterThan(0);
    expect(report.loadFailures).toEqual([]);
    expect(report.loadCompleted).toBe(1000);
    for (const kind of ['params', 'notification', 'bad-id', 'cancel', 'start-then-cancel', 'response', 'body', 'fatal']) {
      expect(report.byKind[kind], kind).toBeGreaterThan(0);
    }
    // The daemon closes connections only for framing it cannot trust, or for sending more than
    // limits.preAuthBytes before initialize, and always says so.
    expect(Object.keys(report.closedByDaemon).length).toBeGreaterThan(0);
    for (const reason of Object.keys(report.closedByDaemon)) {
      expect(reason).toMatch(/^(invalid Content-Length|malformed header line|frame without Content-Length|frame of N bytes over|sent N bytes before initialize)/);
    }
    expect(report.hangUps).toBeGreaterThan(0);
  }, 240_000);
});

describe("the faces' stdin, fuzzed with malformed and oversize lines (npm run fuzz runs the long version)", () => {
  const LINES = 300;
  let box: CliSandbox;

  beforeAll(() => {
    box = new CliSandbox('subagentd-fuzz-faces-');
  });
  afterAll(async () => {
    await box?.cleanup();
  });

  it.each(['mcp', 'acp'] as const)(`%s: ${LINES} lines, 0 hangs, every oversize line answered -32600 for its id, the face alive`, async (face) => {
    const report = await withSeed(`${face} stdin`, () => runFaceFuzz({ box, face, lines: LINES, seed: SEED }));
    figures.push(`${face} stdin fuzz: ${JSON.stringify(report)}`);
    expect(report.hangs).toEqual([]);
    expect(report.alive).toBe(true);
    expect(report.garbage).toBe(0);
    expect(report.linesSent).toBe(LINES);
    for (const kind of ['request', 'malformed', 'non-object', 'bad-envelope', 'oversize']) expect(report.byKind[kind], kind).toBeGreaterThan(0);
    expect(report.oversizeAnswered).toBe(report.byKind['oversize']);
    // Each malformed line (-32700) and each non-object (-32600) is answered, id null.
    expect(report.nullIdErrors).toBeGreaterThanOrEqual((report.byKind['malformed'] ?? 0) + (report.byKind['non-object'] ?? 0));
  }, 180_000);
});
