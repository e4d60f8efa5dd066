/**
 * Bad input, written as raw bytes to the real daemon's socket: each gets the right JSON-RPC error
 * or, when the framing can't be trusted, a closed connection — and another client keeps working.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const parent = { sessionId: 'parent-1', cwd: '/tmp' };
let daemon: DaemonProcess;
let bystander: RawPeer;

beforeAll(async () => {
  daemon = await startDaemon({ maxFrameBytes: 64 * 1024 });
  bystander = await RawPeer.initialized(daemon.socket, 'bystander');
});

afterAll(async () => {
  bystander?.close();
  await daemon?.stop();
});

/** The bystander's service is untouched by whatever the other client did. */
async function bystanderStillServed(): Promise<void> {
  const reply = await bystander.request('subagent/start', { provider: 'echo', prompt: [{ type: 'text', text: 'echo ok' }], parent });
  expect(reply.error).toBeUndefined();
  expect(reply.result).toMatchObject({ provider: 'echo' });
}

describe('framing the daemon cannot trust closes only that connection', () => {
  it.each([
    ['a frame without Content-Length', 'Content-Type: application/json\r\n\r\n{}'],
    ['a non-numeric Content-Length', 'Content-Length: lots\r\n\r\n{}'],
    ['a frame over the size limit', `Content-Length: ${10 * 1024 * 1024}\r\n\r\n{`],
    ['a 2 GB declared length', 'Content-Length: 2000000000\r\n\r\n'],
    ['a header block with no end', `X-Junk: ${'a'.repeat(20_000)}`],
  ])('%s', async (_name, bytes) => {
    const peer = await RawPeer.connect(daemon.socket);
    peer.writeRaw(bytes);
    await peer.whenClosed;
    expect(peer.closed).toBe(true);
    const closing = peer.messages.find((m) => m.id === null);
    expect(closing?.error?.code).toBe(-32600);
    await bystanderStillServed();
  });
});

describe('bad messages inside sound frames get an error and the connection goes on', () => {
  it('malformed JSON → -32700 with id null', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    peer.writeRaw('Content-Length: 9\r\n\r\n{"bad":,}');
    const reply = await peer.waitFor((m) => m.error?.code === -32700);
    expect(reply.id).toBeNull();
    expect((await peer.request('providers/list', {})).result).toBeDefined();
    peer.close();
  });

  it('a batch → -32600', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    peer.send([{ jsonrpc: '2.0', id: 1, method: 'providers/list' }]);
    const reply = await peer.waitFor((m) => m.error !== undefined);
    expect(reply).toMatchObject({ id: null, error: { code: -32600 } });
    expect(reply.error?.message).toMatch(/batch/);
    peer.close();
  });

  it('an object as id → -32600 with id null', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    peer.send({ jsonrpc: '2.0', id: { evil: true }, method: 'providers/list' });
    const reply = await peer.waitFor((m) => m.error !== undefined);
    expect(reply).toMatchObject({ id: null, error: { code: -32600 } });
    peer.close();
  });

  it('deep nesting → -32600 naming the limit, no crash', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    peer.writeRaw(`Content-Length: ${Buffer.byteLength(`{"jsonrpc":"2.0","id":7,"method":"providers/list","params":{"x":${deep}}}`)}\r\n\r\n{"jsonrpc":"2.0","id":7,"method":"providers/list","params":{"x":${deep}}}`);
    const reply = await peer.waitFor((m) => m.id === 7);
    expect(reply.error?.code).toBe(-32600);
    expect(reply.error?.message).toMatch(/nested deeper/);
    await bystanderStillServed();
    peer.close();
  });

  it('in a small frame, one level past the limit → -32600; at the limit, or with brackets only in strings, it is read', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    // The message and its params are two levels: 62 more make 64, the limit; 63 make 65.
    const nested = (levels: number, id: number): string =>
      `{"jsonrpc":"2.0","id":${id},"method":"providers/list","params":{"x":${'['.repeat(levels)}${']'.repeat(levels)}}}`;
    for (const [, body] of [
      [8, nested(63, 8)],
      [9, nested(62, 9)],
      [10, `{"jsonrpc":"2.0","id":10,"method":"providers/list","params":{"x":"${'['.repeat(100)}"}}`],
    ] as const) {
      expect(Buffer.byteLength(body)).toBeLessThan(4096);
      peer.writeRaw(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    }
    const tooDeep = await peer.waitFor((m) => m.id === 8);
    expect(tooDeep.error?.code).toBe(-32600);
    expect(tooDeep.error?.message).toMatch(/nested deeper than 64/);
    for (const id of [9, 10]) {
      const read = await peer.waitFor((m) => m.id === id);
      expect(read.error?.message ?? '').not.toMatch(/nested deeper/);
    }
    await bystanderStillServed();
    peer.close();
  });

  it('an unknown method → -32601', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('run/teleport', {});
    expect(reply.error?.code).toBe(-32601);
    peer.close();
  });

  it('wrong types → -32602 naming the field', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const reply = await peer.request('subagent/start', { provider: 'echo', prompt: 'not an array', parent });
    expect(reply.error).toMatchObject({ code: -32602, data: { code: 'INVALID_REQUEST', field: '/prompt' } });
    const missing = await peer.request('subagent/start', { provider: 'echo', prompt: [] });
    expect(missing.error).toMatchObject({ code: -32602, data: { field: '/parent' } });
    const relative = await peer.request('subagent/start', { provider: 'echo', prompt: [], parent: { sessionId: 's', cwd: 'rel/dir' } });
    expect(relative.error?.data?.field).toBe('/parent/cwd');
    const extra = await peer.request('run/cancel', { runId: 'x', sneaky: 1 });
    expect(extra.error?.data?.field).toBe('/sneaky');
    peer.close();
  });

  it('a __proto__ key is just an unknown field', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const body = '{"jsonrpc":"2.0","id":3,"method":"run/cancel","params":{"runId":"r","__proto__":{}}}';
    peer.writeRaw(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const reply = await peer.waitFor((m) => m.id === 3);
    expect(reply.error?.data?.field).toBe('/__proto__');
    peer.close();
  });

  it('unknown run ids → UNKNOWN_RUN for every run method', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    for (const method of ['run/cancel', 'run/dispose', 'run/wait', 'run/inspect']) {
      const reply = await peer.request(method, { runId: 'run_doesnotexist' });
      expect(reply.error?.data?.code, method).toBe('UNKNOWN_RUN');
    }
    peer.close();
  });
});

describe('the handshake', () => {
  it('refuses every method before initialize', async () => {
    const peer = await RawPeer.connect(daemon.socket);
    const reply = await peer.request('providers/list', {});
    expect(reply.error?.data?.code).toBe('NOT_INITIALIZED');
    peer.close();
  });

  it('refuses a wrong token', async () => {
    const peer = await RawPeer.connect(daemon.socket);
    const reply = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 't', version: '0' }, token: 'guess' });
    expect(reply.error?.data?.code).toBe('UNAUTHORIZED');
    expect((await peer.request('providers/list', {})).error?.data?.code).toBe('NOT_INITIALIZED');
    peer.close();
  });

  it('refuses a major version mismatch naming both versions', async () => {
    const peer = await RawPeer.connect(daemon.socket);
    const reply = await peer.request('initialize', { protocolVersion: '99.0.0', clientInfo: { name: 't', version: '0' } });
    expect(reply.error?.data).toMatchObject({ code: 'PROTOCOL_VERSION', clientVersion: '99.0.0', daemonVersion: PROTOCOL_VERSION });
    expect(reply.error?.message).toContain('99.0.0');
    expect(reply.error?.message).toContain(PROTOCOL_VERSION);
    peer.close();
  });

  it('answers with the daemon identity', async () => {
    const peer = await RawPeer.connect(daemon.socket);
    const token = (await import('node:fs')).readFileSync(`${daemon.socket}.token`, 'utf8').trim();
    const reply = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 't', version: '0' }, token });
    const result = reply.result as { daemon: { pid: number; epoch: string }; providers: Array<{ name: string }> };
    expect(result.daemon.pid).toBe(daemon.proc.pid);
    expect(result.daemon.epoch).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(result.providers.map((p) => p.name)).toEqual(['spawn', 'fork', 'echo', 'bare']);
    peer.close();
  });
});
