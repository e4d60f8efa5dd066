/**
 * Network faults against one real daemon process listening on a unix socket and on loopback TCP,
 * while a bystander client keeps being served:
 *  - frames that used to kill the daemon before `initialize` (a `$/cancelRequest` without an id,
 *    a request with id null, …), over both transports: answered -32600 or dropped, never a crash;
 *  - a fatal frame followed at once by a hang-up (the farewell write then fails with EPIPE);
 *  - `subagent/start` followed at once by `$/cancelRequest`: never a published child;
 *  - an oversize frame from the client library: its error carries the daemon's closing reason;
 *  - TCP's own connection cap (where a newcomer displaces the oldest peer not yet initialized)
 *    and its authentication deadline, with the unix socket unaffected;
 *  - a hang-up at every stage of a start, on both transports: no running child is left behind.
 * Every case ends with the daemon alive and no unhandled rejection or uncaught exception logged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { frame, isAlive, pollUntil, runCleanups, sleep, startLoadDaemon, type LoadDaemon } from './support/load-daemon.js';
import { runEventsIn, type RawPeer, type RpcMessage } from './support/raw-peer.js';
import { initializedPeer, openSocket, processFaults, rawPeer, tcpConfig, type Transport, type WireTarget } from './support/wire-peers.js';

const MAX_FRAME = 64 * 1024;
const TCP_CAP = 4;
const AUTH_MS = 3000;
const parent = { sessionId: 'net', cwd: '/tmp' };
const text = (t: string) => [{ type: 'text' as const, text: t }];
const TRANSPORTS: Transport[] = ['unix', 'tcp'];

const cleanups: Array<() => unknown> = [];
let daemon: LoadDaemon;
let target: WireTarget;
let bystander: RemoteSubagentService;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-net-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const tcp = await tcpConfig(dir, { maxConnections: TCP_CAP, authTimeoutMs: AUTH_MS });
  daemon = await startLoadDaemon({ detachGraceMs: 0, maxFrameBytes: MAX_FRAME, tcp });
  cleanups.push(() => daemon.stop());
  target = { socket: daemon.socket, port: tcp.port };
  bystander = await connect({ socket: daemon.socket, clientInfo: { name: 'bystander', version: '0' }, requestTimeoutMs: 10_000 });
  cleanups.push(() => bystander.close());
});

afterAll(async () => {
  await runCleanups(cleanups);
});

async function bystanderServed(): Promise<void> {
  const run = await bystander.start('echo', { prompt: text('echo still here'), parent, signal: AbortSignal.timeout(10_000) });
  expect((await run.result).output).toEqual(text('echo still here'));
  await run.dispose();
}

function expectHealthy(): void {
  expect(isAlive(daemon.pid), 'the daemon is alive').toBe(true);
  expect(processFaults(daemon.stderr())).toEqual([]);
}

const closeQuietly = (peer: RawPeer): void => peer.close();

describe('frames that killed the daemon before initialize', () => {
  it.each(TRANSPORTS)('over %s: ids that cannot be answered get -32600 with id null; unsound notifications and responses are dropped', async (transport) => {
    const peer = await rawPeer(target, transport);
    cleanups.push(() => closeQuietly(peer));
    const killers: object[] = [
      { jsonrpc: '2.0', method: '$/cancelRequest', params: {} },
      { jsonrpc: '2.0', method: '$/cancelRequest', params: { id: null } },
      { jsonrpc: '2.0', method: '$/cancelRequest', params: { id: { nested: 1 } } },
      { jsonrpc: '2.0', method: '$/cancelRequest' },
      { jsonrpc: '2.0', id: null, method: 'daemon/status', params: {} },
      { jsonrpc: '2.0', id: 1.5, method: 'initialize', params: {} },
      { jsonrpc: '2.0', id: { a: 1 }, method: 'daemon/status' },
      { jsonrpc: '2.0', id: null, result: {} },
      { jsonrpc: '2.0', id: 7, result: 1, error: { code: 1, message: 'both' } },
      { jsonrpc: '2.0', id: 8, error: null },
      { jsonrpc: '2.0', id: 9, error: { code: 'x', message: 5 } },
      { jsonrpc: '2.0', id: 10, result: { to: 'nothing' } },
      { jsonrpc: '2.0', id: 11, error: { code: 1, message: 'an answer to nothing' } },
    ];
    peer.writeRaw(Buffer.concat(killers.map((k) => frame(k))));
    // A request after them all: the connection is alive and in order.
    const after = await peer.request('providers/list', {});
    expect(after.error?.data?.code).toBe('NOT_INITIALIZED');
    const nullReplies = peer.messages.filter((m) => m.id === null);
    expect(nullReplies.map((m) => m.error?.code)).toEqual([-32600, -32600, -32600]);
    expect(peer.messages.filter((m) => m.id !== null && m.id !== after.id)).toEqual([]);
    expect(peer.closed).toBe(false);
    peer.close();
    await bystanderServed();
    expectHealthy();
  });
});

describe('a fatal frame followed at once by a hang-up', () => {
  it.each(TRANSPORTS)('over %s, 30 times: the failed farewell write is not an unhandled rejection', async (transport) => {
    for (let i = 0; i < 30; i++) {
      const socket = await openSocket(target, transport);
      socket.on('error', () => undefined);
      const bytes = i % 2 === 0 ? 'Content-Length: lots\r\n\r\n' : `Content-Length: ${MAX_FRAME * 4}\r\n\r\n{`;
      socket.end(bytes);
      socket.destroy();
    }
    await sleep(200);
    await bystanderServed();
    expectHealthy();
  });
});

describe('subagent/start followed at once by $/cancelRequest', () => {
  it('50 times out of 50 the start answers ABORTED and no child is published', async () => {
    const peer = await initializedPeer(target, 'unix', 'racer');
    cleanups.push(() => closeQuietly(peer));
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 50; i++) {
      const id = `race-${i}`;
      peer.writeRaw(
        Buffer.concat([
          frame({ jsonrpc: '2.0', id, method: 'subagent/start', params: { provider: 'echo', prompt: text(`echo race ${i}`), parent, stream: true } }),
          frame({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } }),
        ]),
      );
      const reply: RpcMessage = await peer.waitFor((m) => m.id === id && m.method === undefined, 5000, `the answer to ${id}`);
      const outcome = reply.error?.data?.code ?? 'published';
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    }
    expect(Object.fromEntries(outcomes)).toEqual({ ABORTED: 50 });
    expect(peer.notifications('subagent/start')).toEqual([]);
    const status = await bystander.ops.status();
    expect(status.runs.starting).toBe(0);
    peer.close();
    expectHealthy();
  });
});

describe('a frame over the limit from the client library', () => {
  it('rejects with DAEMON_UNAVAILABLE carrying the daemon’s closing reason', async () => {
    const client = await connect({ socket: daemon.socket, clientInfo: { name: 'oversize', version: '0' }, requestTimeoutMs: 10_000 });
    cleanups.push(() => client.close());
    const error = await client
      .start('echo', { prompt: text(`echo ${'z'.repeat(MAX_FRAME * 2)}`), parent, signal: AbortSignal.timeout(10_000) })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(SubagentError);
    expect((error as SubagentError).code).toBe('DAEMON_UNAVAILABLE');
    expect((error as SubagentError).message).toMatch(new RegExp(`closed the connection: frame of \\d+ bytes over the ${MAX_FRAME}-byte limit`));
    expect((error as SubagentError).data.reason).toMatch(/over the \d+-byte limit/);
    await bystanderServed();
    expectHealthy();
  });
});

describe('TCP has a connection cap and an authentication deadline of its own', () => {
  it(`past ${TCP_CAP} initialized TCP connections the next are refused with a reason, and unix clients still get in`, async () => {
    const peers: RawPeer[] = [];
    try {
      for (let i = 0; i < TCP_CAP; i++) peers.push(await initializedPeer(target, 'tcp', `tcp-${i}`));
      for (let i = 0; i < 3; i++) peers.push(await rawPeer(target, 'tcp'));
      const refused = peers.slice(TCP_CAP);
      await Promise.all(refused.map((p) => Promise.race([p.whenClosed, sleep(5000)])));
      for (const p of refused) {
        expect(p.closed).toBe(true);
        expect(p.messages[0]?.error).toMatchObject({ data: { code: 'OVERLOADED' } });
        expect(p.messages[0]?.error?.message).toMatch(new RegExp(`^closing: the daemon serves its maximum of ${TCP_CAP} tcp connections`));
      }
      // The admitted ones are served, and the unix socket has its own room.
      expect(peers.slice(0, TCP_CAP).every((p) => !p.closed)).toBe(true);
      const unix = await initializedPeer(target, 'unix', 'unix-while-tcp-full');
      expect((await unix.request('providers/list', {})).result).toBeDefined();
      unix.close();
    } finally {
      for (const p of peers) p.close();
    }
    expectHealthy();
  });

  it(`at the cap of ${TCP_CAP}, a new TCP connection displaces the oldest one not yet initialized, saying why`, async () => {
    await pollUntil(() => bystander.ops.status(), (s) => s.connections <= 1, 5000, 'the earlier TCP peers to be gone');
    const silent: RawPeer[] = [];
    try {
      for (let i = 0; i < TCP_CAP; i++) silent.push(await rawPeer(target, 'tcp'));
      const owner = await initializedPeer(target, 'tcp', 'owner-at-cap');
      expect((await owner.request('providers/list', {})).result).toBeDefined();
      await Promise.race([silent[0]!.whenClosed, sleep(5000)]);
      expect(silent[0]!.closed).toBe(true);
      expect(silent[0]!.messages[0]?.error?.message).toMatch(new RegExp(`^closing: displaced by a newer connection: the daemon serves at most ${TCP_CAP} tcp connections`));
      expect(silent.slice(1).every((p) => !p.closed)).toBe(true);
      owner.close();
    } finally {
      for (const p of silent) p.close();
    }
    expectHealthy();
  });

  it(`a TCP connection that does not initialize within ${AUTH_MS} ms is closed, saying why; an initialized one stays`, async () => {
    // Wait for the refused peers of the previous test to be gone from the cap.
    await pollUntil(() => bystander.ops.status(), (s) => s.connections <= 2, 5000, 'the earlier TCP peers to be gone');
    const idle = await rawPeer(target, 'tcp');
    const authed = await initializedPeer(target, 'tcp', 'authed');
    try {
      await Promise.race([idle.whenClosed, sleep(AUTH_MS + 5000)]);
      expect(idle.closed).toBe(true);
      expect(idle.messages.find((m) => m.id === null)?.error?.message).toBe(`closing: no initialize within ${AUTH_MS} ms`);
      expect(authed.closed).toBe(false);
      expect((await authed.request('providers/list', {})).result).toBeDefined();
    } finally {
      idle.close();
      authed.close();
    }
    expectHealthy();
  }, 20_000);
});

/**
 * The stages of a start, each an await point of the daemon's handling: the peer hangs up right
 * after the stage. `writes` go out first; `until` is what the peer waits for before hanging up.
 */
interface Stage {
  readonly name: string;
  readonly initialize: boolean;
  readonly writes: (peer: RawPeer) => void;
  readonly until?: (peer: RawPeer) => Promise<unknown>;
}

const tools = [{ name: 'lookup', description: 'a client-hosted tool', inputSchema: { type: 'object' } }];
const startFrame = (id: string, prompt: string): Buffer =>
  frame({ jsonrpc: '2.0', id, method: 'subagent/start', params: { provider: 'echo', prompt: text(prompt), parent, stream: true, tools } });
const half = (bytes: Buffer): Buffer => bytes.subarray(0, Math.floor(bytes.length / 2));
const replyTo = (id: string) => (peer: RawPeer) => peer.waitFor((m) => m.id === id && m.method === undefined, 5000, `reply to ${id}`);

const STAGES: Stage[] = [
  { name: 'right after connecting', initialize: false, writes: () => undefined },
  { name: 'mid-way through the initialize frame', initialize: false, writes: (p) => p.writeRaw(half(frame({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }))) },
  { name: 'mid-way through the start frame', initialize: true, writes: (p) => p.writeRaw(half(startFrame('s', 'echo half'))) },
  { name: 'while the provider readies the child', initialize: true, writes: (p) => p.writeRaw(startFrame('s', 'slow-start 300')) },
  { name: 'before the start is answered', initialize: true, writes: (p) => p.writeRaw(startFrame('s', 'hang')) },
  { name: 'once the start is answered', initialize: true, writes: (p) => p.writeRaw(startFrame('s', 'hang')), until: replyTo('s') },
  {
    name: 'once progress streams',
    initialize: true,
    writes: (p) => p.writeRaw(startFrame('s', 'stream 100000 64')),
    until: (p) => p.waitFor((m) => runEventsIn(m).length > 0, 5000, 'progress'),
  },
  {
    name: 'while the daemon waits for a client tool',
    initialize: true,
    writes: (p) => p.writeRaw(startFrame('s', 'tool lookup {}')),
    until: (p) => p.waitFor((m) => m.method === 'tool/call', 5000, 'tool/call'),
  },
  {
    name: 'with a cancel of the run unanswered',
    initialize: true,
    writes: (p) => p.writeRaw(startFrame('s', 'hang')),
    until: async (p) => {
      const reply = await replyTo('s')(p);
      p.writeRaw(frame({ jsonrpc: '2.0', id: 'c', method: 'run/cancel', params: { runId: (reply.result as { runId: string }).runId } }));
    },
  },
];

describe('a hang-up at every stage of a start', () => {
  it.each(TRANSPORTS)('over %s: the daemon survives each, and no child is left running or starting', async (transport) => {
    for (const stage of STAGES) {
      const peer = stage.initialize ? await initializedPeer(target, transport, 'hang-up') : await rawPeer(target, transport);
      stage.writes(peer);
      await stage.until?.(peer);
      peer.close();
      await pollUntil(
        () => bystander.ops.status(),
        (s) => s.runs.running === 0 && s.runs.starting === 0 && s.admission.queued === 0,
        10_000,
        `no live run after a hang-up ${stage.name}`,
      );
    }
    await bystanderServed();
    expectHealthy();
  }, 60_000);
});
