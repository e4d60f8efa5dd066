/**
 * The seam's rules, one by one, at the wire of a real daemon process: order of start checks,
 * lifecycle order and scoping, ownership, cancellation before and after readiness, disconnect.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION, encodeFrame } from '../protocol/index.js';
import { REPO, startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer, type RpcMessage } from './support/raw-peer.js';

const parent = { sessionId: 'parent-1', cwd: '/tmp' };
const prompt = (text: string) => [{ type: 'text', text }];
let daemon: DaemonProcess;

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
});
afterAll(async () => {
  await daemon?.stop();
});

async function stats(peer: RawPeer): Promise<{ rollbacks: number; started: number; disposed: number }> {
  const start = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('stats'), parent });
  const { runId } = start.result as { runId: string };
  const result = (await peer.request('run/wait', { runId })).result as { output: Array<{ text: string }> };
  return JSON.parse(result.output[0]!.text) as { rollbacks: number; started: number; disposed: number };
}

const code = (m: RpcMessage): string | undefined => m.error?.data?.code;

describe('start checks, in the seam order', () => {
  it('an unknown provider is NO_PROVIDER', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'nope', prompt: prompt('x'), parent });
    expect(code(reply)).toBe('NO_PROVIDER');
    peer.close();
  });

  it('the first missing capability fails, in order outputSchema, maxDepth, toolFilter, persona', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const schema = { type: 'object', properties: {} };
    const all = { outputSchema: schema, maxDepth: 2, toolFilter: { allow: ['a'] }, persona: 'p' };
    const cases: Array<[Record<string, unknown>, string]> = [
      [all, '/outputSchema'],
      [{ ...all, outputSchema: undefined }, '/maxDepth'],
      [{ toolFilter: { deny: ['a'] }, persona: 'p' }, '/toolFilter'],
      [{ persona: 'p' }, '/persona'],
    ];
    const before = await stats(peer);
    for (const [extra, field] of cases) {
      const reply = await peer.request('subagent/start', { provider: 'bare', prompt: prompt('x'), parent, ...extra });
      expect(code(reply)).toBe('UNSUPPORTED_CAPABILITY');
      expect(reply.error?.data?.field).toBe(field);
    }
    // The provider was never called: nothing started beyond the two stats probes.
    expect((await stats(peer)).started).toBe(before.started + 1);
    peer.close();
  });

  it('capabilities are checked before the maxDepth value', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'bare', prompt: prompt('x'), parent, maxDepth: -1 });
    expect(code(reply)).toBe('UNSUPPORTED_CAPABILITY');
    peer.close();
  });

  it.each([[-1], [1.5], [Number.MAX_SAFE_INTEGER + 2]])('maxDepth %s is INVALID_REQUEST', async (maxDepth) => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('x'), parent, maxDepth });
    expect(code(reply)).toBe('INVALID_REQUEST');
    expect(reply.error?.data?.field).toBe('/maxDepth');
    peer.close();
  });

  it('maxDepth -0 on the wire is INVALID_REQUEST', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const body = `{"jsonrpc":"2.0","id":99,"method":"subagent/start","params":{"provider":"echo","prompt":[],"parent":{"sessionId":"p","cwd":"/tmp"},"maxDepth":-0}}`;
    peer.writeRaw(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const reply = await peer.waitFor((m) => m.id === 99);
    expect(code(reply)).toBe('INVALID_REQUEST');
    peer.close();
  });

  it('maxDepth value is checked before the schema subset', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', {
      provider: 'echo',
      prompt: prompt('x'),
      parent,
      maxDepth: 1.5,
      outputSchema: { type: 'object', patternProperties: {} },
    });
    expect(reply.error?.data?.field).toBe('/maxDepth');
    peer.close();
  });

  it.each([
    [{ type: 'string' }, /root must be an object/],
    [{ type: 'object', patternProperties: {} }, /patternProperties/],
    [{ oneOf: [{ type: 'object' }] }, /two or more/],
    [{ type: 'object', oneOf: [{ type: 'object' }, { type: 'object' }] }, /beside type/],
    [{ type: 'object', additionalProperties: { type: 'string' } }, /boolean/],
    [{ type: 'object', properties: { a: { type: ['string', 'null'] } } }, /one JSON type/],
    // Keywords that do not fit the declared type, or name what is not there (issue #10 item 10).
    [{ type: 'object', properties: { a: { type: 'string' } }, required: ['b'] }, /names "b"/],
    [{ type: 'object', required: ['a'] }, /names "a"/],
    [{ type: 'object', properties: { a: { type: 'string', properties: { b: { type: 'string' } } } } }, /properties applies to type "object"/],
    [{ type: 'object', properties: { a: { type: 'string', required: [] } } }, /required applies to type "object"/],
    [{ type: 'object', properties: { a: { type: 'number', items: { type: 'string' } } } }, /items applies to type "array"/],
    [{ type: 'object', enum: ['x'] }, /enum applies to scalar types/],
    [{ type: 'object', properties: { a: { type: 'array', const: 1 } } }, /const applies to scalar types/],
    [{ type: 'object', properties: { a: { type: 'string', enum: ['x', 2] } } }, /value 2 is not of type "string"/],
    [{ type: 'object', properties: { a: { type: 'integer', enum: [1, 1.5] } } }, /value 1.5 is not of type "integer"/],
    [{ type: 'object', properties: { a: { type: 'boolean', const: 'yes' } } }, /not of type "boolean"/],
    // Structural keywords on a node with neither type nor oneOf (issue 31, A.4).
    [{ type: 'object', properties: { a: { properties: { b: { type: 'string' } } } } }, /keyword "properties" needs a "type"/],
    [{ type: 'object', properties: { a: { items: { type: 'string' } } } }, /keyword "items" needs a "type"/],
    [{ type: 'object', properties: { a: { additionalProperties: false } } }, /keyword "additionalProperties" needs a "type"/],
    [{ type: 'object', properties: { a: { required: [] } } }, /keyword "required" needs a "type"/],
    [{ type: 'object', properties: { a: { type: 'array', items: { description: 'x', properties: {} } } } }, /items\/properties: keyword "properties" needs a "type"/],
  ])('schema %j is UNSUPPORTED_SCHEMA', async (outputSchema, message) => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('x'), parent, outputSchema });
    expect(code(reply)).toBe('UNSUPPORTED_SCHEMA');
    expect(reply.error?.message).toMatch(message);
    peer.close();
  });

  it('accepts the whole documented subset', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const outputSchema = {
      type: 'object',
      title: 't',
      description: 'd',
      required: ['kind'],
      additionalProperties: false,
      properties: {
        kind: { type: 'string', enum: ['a', 'b'], default: 'a', examples: ['a'] },
        fixed: { const: 3 },
        list: { type: 'array', items: { type: 'integer' } },
        either: { oneOf: [{ type: 'string' }, { type: 'null' }] },
      },
    };
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('x'), parent, outputSchema });
    expect(reply.error).toBeUndefined();
    peer.close();
  });

  it('child depth is 1 + max(stored, runtime) and maxDepth caps it with DEPTH_EXCEEDED', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const ok = await peer.request('subagent/start', {
      provider: 'echo',
      prompt: prompt('depth'),
      parent: { ...parent, delegationDepth: 1, subagentDepth: 2 },
      maxDepth: 3,
    });
    const { runId } = ok.result as { runId: string };
    const result = (await peer.request('run/wait', { runId })).result as { output: Array<{ text: string }> };
    expect(result.output[0]!.text).toBe('3');
    const over = await peer.request('subagent/start', {
      provider: 'echo',
      prompt: prompt('depth'),
      parent: { ...parent, delegationDepth: 3 },
      maxDepth: 3,
    });
    expect(over.error?.data).toMatchObject({ code: 'DEPTH_EXCEEDED', attemptedDepth: 4, maxDepth: 3 });
    peer.close();
  });

  it.each([[{ delegationDepth: -1 }], [{ subagentDepth: 0.5 }], [{ delegationDepth: Number.MAX_SAFE_INTEGER }]])(
    'a malformed or unrepresentable parent depth %j is INVALID_REQUEST, never read as 0',
    async (depth) => {
      const peer = await RawPeer.initialized(daemon.socket);
      const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('x'), parent: { ...parent, ...depth } });
      expect(code(reply)).toBe('INVALID_REQUEST');
      peer.close();
    },
  );

  it('a provider that fails to start is START_FAILED with its reason, and emits no lifecycle event', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('fail-start'), parent });
    expect(code(reply)).toBe('START_FAILED');
    expect(reply.error?.message).toContain('fixture refused to start');
    await new Promise((r) => setTimeout(r, 100));
    expect(peer.notifications('subagent/start')).toHaveLength(0);
    peer.close();
  });
});

describe('lifecycle', () => {
  it('to a 1.2 client, subagent/start precedes the start reply and subagent/end, and carries the result', async () => {
    const peer = await RawPeer.initialized(daemon.socket, 'raw-1.2', '1.2.0');
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo hi'), parent });
    const { runId } = reply.result as { runId: string };
    const end = await peer.waitFor((m) => m.method === 'subagent/end');
    const startIndex = peer.messages.findIndex((m) => m.method === 'subagent/start');
    expect(startIndex).toBeGreaterThanOrEqual(0);
    expect(startIndex).toBeLessThan(peer.messages.indexOf(reply));
    expect(peer.messages.indexOf(reply)).toBeLessThan(peer.messages.indexOf(end));
    expect(end.params).toMatchObject({
      runId,
      provider: 'echo',
      stopReason: 'completed',
      lastAssistantMessage: [{ type: 'text', text: 'echo hi' }],
      result: { stopReason: 'completed', usage: { promptTokens: 1 } },
    });
    expect(runId).toMatch(/^run_[A-Za-z0-9_-]{24}$/);
    peer.close();
  });

  it('to a 1.3 client, the start reply stands for subagent/start, and a run ending at once follows it', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo hi'), parent });
    const { runId } = reply.result as { runId: string };
    const end = await peer.waitFor((m) => m.method === 'subagent/end');
    expect(peer.notifications('subagent/start')).toEqual([]);
    expect(peer.messages.indexOf(reply)).toBeLessThan(peer.messages.indexOf(end));
    expect(end.params).toMatchObject({ runId, stopReason: 'completed' });
    // A resumption's reply stands for its notice too.
    const resumed = await peer.request('run/resume', { runId, prompt: prompt('echo again') });
    await peer.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId?: string }).runId === (resumed.result as { runId: string }).runId);
    expect(peer.notifications('subagent/start')).toEqual([]);
    peer.close();
  });

  it('a run streams after its start reply, and ends after its events; a resumed run likewise', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    // The echo fixture emits its event inside the provider's start, before the run is published.
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo early'), parent, stream: true });
    const { runId } = reply.result as { runId: string };
    const end = await peer.waitFor((m) => m.method === 'subagent/end');
    const [event] = peer.runEvents();
    expect(event).toMatchObject({ runId, event: { text: 'echo early' } });
    expect(peer.messages.indexOf(reply)).toBeLessThan(peer.messages.indexOf(event!.message));
    expect(peer.messages.indexOf(event!.message)).toBeLessThan(peer.messages.indexOf(end));
    const resumed = await peer.request('run/resume', { runId, prompt: prompt('echo again'), stream: true });
    const next = (resumed.result as { runId: string }).runId;
    const nextEnd = await peer.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId: string }).runId === next);
    const nextEvent = peer.runEvents().find((e) => e.runId === next);
    expect(nextEvent).toMatchObject({ event: { text: 'echo again' } });
    expect(peer.messages.indexOf(resumed)).toBeLessThan(peer.messages.indexOf(nextEvent!.message));
    expect(peer.messages.indexOf(nextEvent!.message)).toBeLessThan(peer.messages.indexOf(nextEnd));
    peer.close();
  });

  it('events reach only the connection that started the run', async () => {
    const a = await RawPeer.initialized(daemon.socket, 'a');
    const b = await RawPeer.initialized(daemon.socket, 'b');
    await a.request('subagent/start', { provider: 'echo', prompt: prompt('echo mine'), parent });
    await a.waitFor((m) => m.method === 'subagent/end');
    await b.request('providers/list', {});
    expect(b.notifications('subagent/start')).toHaveLength(0);
    expect(b.notifications('subagent/end')).toHaveLength(0);
    a.close();
    b.close();
  });

  it('an infrastructure fault ends with stopReason error and the fault, and run/wait rejects', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('infra-fault'), parent });
    const { runId } = reply.result as { runId: string };
    const end = await peer.waitFor((m) => m.method === 'subagent/end');
    expect(end.params).toMatchObject({ runId, stopReason: 'error', error: { message: 'the fixture lost its backend' } });
    expect((await peer.request('run/wait', { runId })).error?.message).toContain('lost its backend');
    peer.close();
  });

  it('streams run/event only when asked', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo quiet'), parent });
    await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo loud'), parent, stream: true });
    await waitFor(() => peer.notifications('subagent/end').length === 2, 5000);
    expect(peer.runEvents().map((e) => e.event.text)).toEqual(['echo loud']);
    peer.close();
  });
});

describe('ownership', () => {
  it('another connection gets NOT_OWNER for every control of a run', async () => {
    const owner = await RawPeer.initialized(daemon.socket, 'owner');
    const other = await RawPeer.initialized(daemon.socket, 'other');
    const reply = await owner.request('subagent/start', { provider: 'echo', prompt: prompt('hang'), parent });
    const { runId } = reply.result as { runId: string };
    for (const [method, extra] of [
      ['run/cancel', {}],
      ['run/dispose', {}],
      ['run/wait', {}],
      ['run/sendMessage', { content: prompt('x') }],
      ['run/resume', { prompt: prompt('x') }],
    ] as const) {
      const denied = await other.request(method, { runId, ...extra });
      expect(code(denied), method).toBe('NOT_OWNER');
    }
    const inspect = await other.request('run/inspect', { runId });
    expect(inspect.result).toMatchObject({ run: { runId, mine: false, state: 'running' } });
    await owner.request('run/cancel', { runId });
    const end = await owner.waitFor((m) => m.method === 'subagent/end');
    expect(end.params).toMatchObject({ stopReason: 'aborted' });
    owner.close();
    other.close();
  });

  it('run/inspect shows a session only to its owner or the holder of its token', async () => {
    const owner = await RawPeer.initialized(daemon.socket, 'owner');
    const other = await RawPeer.initialized(daemon.socket, 'other');
    const model = `scripted:${REPO}/examples/hello.json`;
    const reply = await owner.request('subagent/start', { provider: 'spawn', prompt: prompt('secret task'), parent, agentOptions: { model } });
    const { runId, runToken } = reply.result as { runId: string; runToken: string };
    await owner.request('run/wait', { runId });
    const mine = (await owner.request('run/inspect', { runId })).result as { header?: unknown; events?: Array<{ type: string }> };
    expect(mine.header).toMatchObject({ provider: 'spawn', parentSession: parent.sessionId });
    expect(mine.events?.[0]).toMatchObject({ type: 'user/message', content: [{ text: 'secret task' }] });
    const theirs = (await other.request('run/inspect', { runId })).result as Record<string, unknown>;
    expect(theirs).toMatchObject({ run: { runId, mine: false, stopReason: 'completed' } });
    expect(theirs['events']).toBeUndefined();
    expect(JSON.stringify(theirs)).not.toContain('secret task');
    const withToken = (await other.request('run/inspect', { runId, runToken })).result as { events?: unknown[] };
    expect(withToken.events?.length).toBe(mine.events?.length);
    owner.close();
    other.close();
  });

  it('a closed connection has its runs cancelled and disposed', async () => {
    const observer = await RawPeer.initialized(daemon.socket, 'observer');
    const before = await stats(observer);
    const owner = await RawPeer.initialized(daemon.socket, 'owner');
    const reply = await owner.request('subagent/start', { provider: 'echo', prompt: prompt('hang'), parent });
    const { runId } = reply.result as { runId: string };
    owner.close();
    await waitFor(() => false, 0).catch(() => undefined);
    let info: RpcMessage | undefined;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      info = await observer.request('run/inspect', { runId });
      if ((info.result as { run: { state: string } }).run.state === 'disposed') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(info?.result).toMatchObject({ run: { state: 'disposed', stopReason: 'aborted' } });
    expect((await stats(observer)).disposed).toBeGreaterThan(before.disposed);
    observer.close();
  });
});

describe('starts and disposes served as they are read (daemon/connection/direct-lane.ts)', () => {
  it('keep the order they were read in: a start written in one chunk behind its initialize is served after it', async () => {
    const peer = await RawPeer.connect(daemon.socket);
    const token = readFileSync(`${daemon.socket}.token`, 'utf8').trim();
    const frames = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'pipelined', version: '0' }, token } },
      { jsonrpc: '2.0', id: 2, method: 'subagent/start', params: { provider: 'echo', prompt: prompt('echo in order'), parent } },
    ];
    peer.writeRaw(Buffer.concat(frames.map((frame) => encodeFrame(frame))));
    const started = await peer.waitFor((m) => m.id === 2);
    expect(started.error).toBeUndefined();
    expect(started.result).toMatchObject({ provider: 'echo' });
    const runId = (started.result as { runId: string }).runId;
    // A dispose and a wait pipelined behind it, the wait through the library's queue, the dispose
    // behind the wait: the wait still answers the result, the dispose after it.
    peer.writeRaw(Buffer.concat([encodeFrame({ jsonrpc: '2.0', id: 3, method: 'run/wait', params: { runId } }), encodeFrame({ jsonrpc: '2.0', id: 4, method: 'run/dispose', params: { runId } })]));
    const disposed = await peer.waitFor((m) => m.id === 4);
    expect(disposed.result).toEqual({});
    const answers = peer.messages.filter((m) => m.id === 3 || m.id === 4).map((m) => m.id);
    expect(answers).toEqual([3, 4]);
    expect(peer.messages.find((m) => m.id === 3)?.result).toMatchObject({ stopReason: 'completed' });
    peer.close();
  });
});

describe('cancellation', () => {
  it('$/cancelRequest before readiness rolls back and rejects with ABORTED', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const before = await stats(peer);
    peer.send({ jsonrpc: '2.0', id: 500, method: 'subagent/start', params: { provider: 'echo', prompt: prompt('slow-start 10000'), parent } });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    peer.send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 500 } });
    const reply = await peer.waitFor((m) => m.id === 500, 3000);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(reply.error).toMatchObject({ code: -32800, data: { code: 'ABORTED' } });
    expect((await stats(peer)).rollbacks).toBe(before.rollbacks + 1);
    expect(peer.notifications('subagent/end')).toHaveLength(2); // only the two stats probes'
    peer.close();
  });

  it('a client that disconnects mid-start has the start rolled back', async () => {
    const observer = await RawPeer.initialized(daemon.socket, 'observer');
    const before = await stats(observer);
    const peer = await RawPeer.initialized(daemon.socket);
    peer.send({ jsonrpc: '2.0', id: 1, method: 'subagent/start', params: { provider: 'echo', prompt: prompt('slow-start 10000'), parent } });
    await new Promise((r) => setTimeout(r, 100));
    peer.close();
    const deadline = Date.now() + 3000;
    let now = before;
    while (Date.now() < deadline && now.rollbacks === before.rollbacks) now = await stats(observer);
    expect(now.rollbacks).toBe(before.rollbacks + 1);
    observer.close();
  });

  it('a $/cancelRequest read after the start was answered cancels the run it answered (a late cancel)', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    peer.send({ jsonrpc: '2.0', id: 'late-1', method: 'subagent/start', params: { provider: 'echo', prompt: prompt('hang'), parent } });
    const { runId } = (await peer.waitFor((m) => m.id === 'late-1', 10_000)).result as { runId: string };
    peer.send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 'late-1' } });
    expect((await peer.request('run/wait', { runId })).result).toMatchObject({ stopReason: 'aborted' });
    expect(peer.notifications('subagent/end').map((m) => m.params)).toMatchObject([{ runId, stopReason: 'aborted' }]);
    // A request that reuses the id takes it over: a cancel naming it no longer reaches the run.
    peer.send({ jsonrpc: '2.0', id: 'late-2', method: 'subagent/start', params: { provider: 'echo', prompt: prompt('hang'), parent } });
    const second = ((await peer.waitFor((m) => m.id === 'late-2', 10_000)).result as { runId: string }).runId;
    peer.send({ jsonrpc: '2.0', id: 'late-2', method: 'providers/list', params: {} });
    await peer.waitFor((m) => m.id === 'late-2' && m.result !== undefined && 'providers' in (m.result as object), 10_000);
    peer.send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 'late-2' } });
    expect((await peer.request('run/inspect', { runId: second })).result).toMatchObject({ run: { state: 'running' } });
    expect((await peer.request('run/cancel', { runId: second })).result).toEqual({});
    expect((await peer.request('run/wait', { runId: second })).result).toMatchObject({ stopReason: 'aborted' });
    expect((await peer.request('run/dispose', { runId: second })).result).toEqual({});
    expect((await peer.request('run/dispose', { runId })).result).toEqual({});
    peer.close();
  });

  it('run/cancel after readiness settles the run aborted; cancel and dispose are idempotent', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const { runId } = (await peer.request('subagent/start', { provider: 'echo', prompt: prompt('hang'), parent })).result as { runId: string };
    expect((await peer.request('run/cancel', { runId })).result).toEqual({});
    const waited = await peer.request('run/wait', { runId });
    expect(waited.result).toMatchObject({ stopReason: 'aborted' });
    expect((await peer.request('run/cancel', { runId })).result).toEqual({});
    expect((await peer.request('run/dispose', { runId })).result).toEqual({});
    expect((await peer.request('run/dispose', { runId })).result).toEqual({});
    expect(peer.notifications('subagent/end')).toHaveLength(1);
    peer.close();
  });
});

describe('runtime capabilities', () => {
  it('sendMessage steers a running child; resume continues a settled one', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const { runId } = (await peer.request('subagent/start', { provider: 'echo', prompt: prompt('steer'), parent })).result as { runId: string };
    expect(code(await peer.request('run/resume', { runId, prompt: prompt('echo again') }))).toBe('RUN_STATE');
    await peer.request('run/sendMessage', { runId, content: prompt('go left') });
    expect((await peer.request('run/wait', { runId })).result).toMatchObject({ output: [{ text: 'go left' }] });
    expect(code(await peer.request('run/sendMessage', { runId, content: prompt('late') }))).toBe('RUN_STATE');
    const resumed = await peer.request('run/resume', { runId, prompt: prompt('echo again') });
    const next = (resumed.result as { runId: string }).runId;
    expect(next).not.toBe(runId);
    expect((await peer.request('run/wait', { runId: next })).result).toMatchObject({ output: [{ text: 'echo again' }] });
    peer.close();
  });

  it('a provider without them answers UNSUPPORTED_OPERATION', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const { runId } = (await peer.request('subagent/start', { provider: 'bare', prompt: prompt('hang'), parent })).result as { runId: string };
    expect(code(await peer.request('run/sendMessage', { runId, content: prompt('x') }))).toBe('UNSUPPORTED_OPERATION');
    expect(code(await peer.request('run/resume', { runId, prompt: prompt('x') }))).toBe('UNSUPPORTED_OPERATION');
    const list = await peer.request('providers/list', {});
    expect(list.result).toMatchObject({ providers: [{ name: 'spawn' }, { name: 'fork' }, { name: 'echo', runtime: { sendMessage: true, resume: true } }, { name: 'bare', runtime: { sendMessage: false, resume: false } }] });
    peer.close();
  });
});

describe('results are checked against their declaration before they are sent', () => {
  it('a result the declaration refuses is answered -32603 naming the field, and never sent', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    // The fixture settles with the stop reason it is given; the wire allows at most 64 characters.
    const start = await peer.request('subagent/start', { provider: 'echo', prompt: prompt(`stop ${'x'.repeat(65)}`), parent });
    const { runId } = start.result as { runId: string };
    const reply = await peer.request('run/wait', { runId });
    expect(reply.result).toBeUndefined();
    expect(reply.error?.code).toBe(-32603);
    expect(reply.error?.message).toBe('run/wait failed: the daemon produced an invalid result: /stopReason must NOT have more than 64 characters');
    peer.close();
  });
});
