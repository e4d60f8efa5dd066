/**
 * Framing on the way in (common/frame-splitter.ts, common/frame-reader.ts): the shared splitter's
 * rules, the client's reader on a real socket, and what a client does when its daemon's bytes go
 * bad (a fake daemon on a real unix socket).
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Message } from 'vscode-jsonrpc/node';
import { FrameMessageReader } from '../common/frame-reader.js';
import { FrameSplitter, type SplitLimits } from '../common/frame-splitter.js';
import { connect, SubagentError } from '../client/index.js';
import { encodeFrame } from '../protocol/index.js';
import { FakeDaemon } from './support/fake-daemon-peer.js';

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const LIMITS: SplitLimits = { maxFrameBytes: 64, maxHeaderBytes: 32 };

function splitterFor(limits = LIMITS): { splitter: FrameSplitter; bodies: string[]; problems: string[] } {
  const bodies: string[] = [];
  const problems: string[] = [];
  const splitter = new FrameSplitter(limits, (buffer, start, end) => bodies.push(buffer.toString('utf8', start, end)), (problem) => problems.push(problem));
  return { splitter, bodies, problems };
}

const frame = (body: string): Buffer => Buffer.concat([Buffer.from(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`), Buffer.from(body)]);

describe('FrameSplitter', () => {
  it('hands over several frames of one chunk in order, and a body split over chunks once, joined', () => {
    const { splitter, bodies } = splitterFor();
    const third = frame('{"c":[1,2]}');
    splitter.push(Buffer.concat([frame('{"a":1}'), frame('{"b":"✓"}'), third.subarray(0, third.length - 6)]));
    expect(bodies).toEqual(['{"a":1}', '{"b":"✓"}']);
    splitter.push(third.subarray(third.length - 6, third.length - 3));
    expect(bodies).toHaveLength(2);
    splitter.push(third.subarray(third.length - 3));
    expect(bodies).toEqual(['{"a":1}', '{"b":"✓"}', '{"c":[1,2]}']);
    expect(splitter.rest().length).toBe(0);
  });

  it('takes other header lines in any case, as the protocol allows', () => {
    const { splitter, bodies, problems } = splitterFor({ maxFrameBytes: 64, maxHeaderBytes: 128 });
    splitter.push(Buffer.from('content-length: 2\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n{}'));
    expect(problems).toEqual([]);
    expect(bodies).toEqual(['{}']);
  });

  it('stops between frames while paused and goes on with what is buffered when resumed', () => {
    const bodies: string[] = [];
    const splitter: FrameSplitter = new FrameSplitter(
      LIMITS,
      (buffer, start, end) => {
        bodies.push(buffer.toString('utf8', start, end));
        splitter.pause();
      },
      () => undefined,
    );
    splitter.push(Buffer.concat([frame('1'), frame('2')]));
    expect(bodies).toEqual(['1']);
    splitter.push(frame('3'));
    expect(bodies).toEqual(['1']);
    splitter.resume();
    expect(bodies).toEqual(['1', '2']);
    splitter.resume();
    splitter.resume();
    expect(bodies).toEqual(['1', '2', '3']);
  });

  it('is fatal on a length over the limit, a header without a length, or an endless header, once, keeping the rest', () => {
    const over = splitterFor();
    over.splitter.push(Buffer.from('Content-Length: 65\r\n\r\n'));
    over.splitter.push(frame('{}'));
    expect(over.problems).toEqual(['frame of 65 bytes over the 64-byte limit']);
    expect(over.bodies).toEqual([]);
    expect(over.splitter.rest().toString()).toBe('Content-Length: 65\r\n\r\n');

    const noLength = splitterFor();
    noLength.splitter.push(Buffer.from('Content-Type: x\r\n\r\n{}'));
    expect(noLength.problems).toEqual(['frame without Content-Length']);

    const endless = splitterFor();
    endless.splitter.push(Buffer.from('Content-Length: 2'));
    expect(endless.problems).toEqual([]);
    endless.splitter.push(Buffer.from(' '.repeat(40)));
    expect(endless.problems).toEqual(['header block over 32 bytes']);
  });
});

async function socketPair(): Promise<{ server: Socket; client: Socket }> {
  const dir = await mkdtemp(join(tmpdir(), 'subagentd-frames-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 's.sock');
  const listener: Server = createServer();
  await new Promise<void>((resolve) => listener.listen(path, resolve));
  cleanup.push(() => new Promise<void>((resolve) => listener.close(() => resolve())));
  const accepted = new Promise<Socket>((resolve) => listener.once('connection', resolve));
  const client = createConnection(path);
  const server = await accepted;
  cleanup.push(() => {
    client.destroy();
    server.destroy();
  });
  return { server, client };
}

describe('FrameMessageReader (the client reader) on a real socket', () => {
  it('delivers messages, drops a frame that is not a JSON object with an error and reads on, and is fatal on bad framing', async () => {
    const { server, client } = await socketPair();
    const fatal: string[] = [];
    const reader = new FrameMessageReader(client, (problem) => fatal.push(problem));
    const messages: Message[] = [];
    const errors: string[] = [];
    reader.onError((error) => errors.push(error.message));
    const got = (n: number): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => (messages.length >= n ? resolve() : void setTimeout(check, 5));
        check();
      });
    reader.listen((message) => messages.push(message));
    server.write(Buffer.concat([encodeFrame({ jsonrpc: '2.0', method: 'a' }), frame('not json'), frame('[1]'), encodeFrame({ jsonrpc: '2.0', method: 'b' })]));
    await got(2);
    expect(messages.map((m) => (m as { method?: string }).method)).toEqual(['a', 'b']);
    expect(errors).toEqual([expect.stringMatching(/^a frame from the peer is not JSON/), 'a frame from the peer is not a JSON-RPC message object']);
    const fatalSeen = new Promise<void>((resolve) => reader.onError((error) => error.message.startsWith('unreadable framing') && resolve()));
    server.write(Buffer.concat([Buffer.from('Content-Length: x\r\n\r\n'), encodeFrame({ jsonrpc: '2.0', method: 'c' })]));
    await fatalSeen;
    expect(fatal).toEqual(['invalid Content-Length "x"']);
    expect(messages).toHaveLength(2);
  });
});

describe('a client whose daemon sends bad framing', { timeout: 5000 }, () => {
  it('fails its pending call DAEMON_UNAVAILABLE naming the framing, and refuses later calls', async () => {
    const daemon = await FakeDaemon.start({ handlers: { 'providers/list': () => new Promise(() => undefined) } });
    cleanup.push(() => daemon.close());
    const service = await connect({ socket: daemon.socketPath, reconnect: false });
    cleanup.push(() => service.close());
    const peer = await daemon.connection();
    const pending = service.refreshProviders().catch((error: unknown) => error);
    while (peer.wireCount('providers/list') === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    peer.socket.write('Content-Length: 9999999999\r\n\r\n');
    const error = (await pending) as SubagentError;
    expect(error).toBeInstanceOf(SubagentError);
    expect(error.code).toBe('DAEMON_UNAVAILABLE');
    expect(error.message).toMatch(/unreadable framing from the daemon: frame of 9999999999 bytes over the \d+-byte limit/);
    await expect(service.refreshProviders()).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
  });
});
