import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, defaultDaemonCliPath, PROTOCOL_VERSION, SubagentError } from '../client/index.js';
import { FakeDaemon, IDENTITY, captureLogger, daemonError, descriptor } from './support/fake-daemon-peer.js';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function fakeDaemon(options?: Parameters<typeof FakeDaemon.start>[0]): Promise<FakeDaemon> {
  const daemon = await FakeDaemon.start(options);
  cleanup.push(() => daemon.close());
  return daemon;
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'subagentd-client-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('connect: handshake', { timeout: 5000 }, () => {
  it('sends initialize with the protocol version, client info and token, and exposes the daemon identity', async () => {
    const daemon = await fakeDaemon({ providers: [descriptor('spawn'), descriptor('fork', { inheritsParentContext: true })] });
    const service = await connect({ socket: daemon.socketPath, token: 'secret', clientInfo: { name: 'harness', version: '9.9.9' } });
    cleanup.push(() => service.close());
    const peer = await daemon.connection();
    expect(peer.paramsOf('initialize')).toEqual([
      { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'harness', version: '9.9.9' }, token: 'secret' },
    ]);
    expect(service.daemon).toEqual(IDENTITY);
    expect(service.daemon.epoch).toBe('epoch-test-1');
    expect(service.protocolVersion).toBe(PROTOCOL_VERSION);
    expect(service.list()).toEqual(['spawn', 'fork']);
  });

  it('defaults clientInfo to this package and sends no token when none is given', async () => {
    const daemon = await fakeDaemon();
    const service = await connect({ socket: daemon.socketPath });
    cleanup.push(() => service.close());
    const [params] = (await daemon.connection()).paramsOf('initialize') as Array<Record<string, unknown>>;
    expect(params).toEqual({ protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'subagentd-client', version: '0.1.0' } });
  });

  it('presents the token from the file beside the socket when none is given', async () => {
    const daemon = await fakeDaemon();
    await writeFile(`${daemon.socketPath}.token`, 'from-file\n', { mode: 0o600 });
    const service = await connect({ socket: daemon.socketPath });
    cleanup.push(() => service.close());
    const [params] = (await daemon.connection()).paramsOf('initialize') as Array<Record<string, unknown>>;
    expect(params?.['token']).toBe('from-file');
  });

  it('rethrows the daemon version error as SubagentError with its code and details', async () => {
    const daemon = await fakeDaemon({
      handlers: {
        initialize: () =>
          daemonError('PROTOCOL_VERSION', 'daemon speaks 2.0.0, client 1.0.0', { daemonVersion: '2.0.0', clientVersion: '1.0.0' }),
      },
    });
    const error = await connect({ socket: daemon.socketPath }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({
      code: 'PROTOCOL_VERSION',
      message: 'daemon speaks 2.0.0, client 1.0.0',
      details: { daemonVersion: '2.0.0', clientVersion: '1.0.0' },
    });
  });

  it('refuses a daemon whose answer has another major version', async () => {
    const daemon = await fakeDaemon({
      handlers: { initialize: () => ({ protocolVersion: '2.1.0', daemon: IDENTITY, providers: [] }) },
    });
    await expect(connect({ socket: daemon.socketPath })).rejects.toMatchObject({
      code: 'PROTOCOL_VERSION',
      details: { daemonVersion: '2.1.0', clientVersion: PROTOCOL_VERSION },
    });
  });

  it('rejects an invalid initialize answer with INVALID_REQUEST naming the field, and closes the socket', async () => {
    const daemon = await fakeDaemon({
      handlers: { initialize: () => ({ protocolVersion: PROTOCOL_VERSION, daemon: { ...IDENTITY, epoch: undefined }, providers: [] }) },
    });
    const error = await connect({ socket: daemon.socketPath }).catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/daemon/epoch' } });
    expect((error as Error).message).toContain('/daemon/epoch');
    const peer = await daemon.connection();
    await new Promise<void>((resolve) => (peer.socket.closed ? resolve() : peer.socket.once('close', () => resolve())));
  });
});

describe('connect: unreachable daemon', { timeout: 5000 }, () => {
  it('names a missing socket and says to run `subagentd start` (ENOENT)', async () => {
    const socket = join(await tempDir(), 'absent.sock');
    const error = await connect({ socket }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect((error as Error).message).toContain(socket);
    expect((error as Error).message).toContain('ENOENT');
    expect((error as Error).message).toContain('subagentd start');
  });

  it('treats a path nobody listens on as unavailable (ECONNREFUSED)', async () => {
    const socket = join(await tempDir(), 'stale.sock');
    await writeFile(socket, '');
    const error = await connect({ socket }).catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect((error as Error).message).toContain(socket);
    expect((error as Error).message).toContain('ECONNREFUSED');
  });

  it('calls the autoStart hook once when nothing listens, then connects', async () => {
    const dir = await tempDir();
    const calls: string[] = [];
    let started: FakeDaemon | undefined;
    const service = await connect({
      socket: join(dir, 'later.sock'),
      autoStart: async (socket) => {
        calls.push(socket);
        started = await fakeDaemon();
        // Point the retry at where the fake actually listens.
        await rm(socket, { force: true });
        await symlink(started.socketPath, socket);
      },
    });
    cleanup.push(() => service.close());
    expect(calls).toEqual([join(dir, 'later.sock')]);
    expect(service.daemon.epoch).toBe(IDENTITY.epoch);
    expect(started?.connections).toHaveLength(1);
  });
});

describe('connect: requestTimeoutMs', { timeout: 5000 }, () => {
  it('rejects a control request the daemon never answers with DAEMON_UNRESPONSIVE and cancels it', async () => {
    const daemon = await fakeDaemon({ handlers: { 'providers/list': () => new Promise(() => undefined) } });
    const service = await connect({ socket: daemon.socketPath, requestTimeoutMs: 150 });
    cleanup.push(() => service.close());
    const began = Date.now();
    const error = await service.refreshProviders().catch((failure: unknown) => failure);
    const elapsed = Date.now() - began;
    expect(error).toMatchObject({ code: 'DAEMON_UNRESPONSIVE' });
    expect((error as Error).message).toContain('providers/list');
    expect(elapsed).toBeGreaterThanOrEqual(140);
    expect(elapsed).toBeLessThan(1000);
    const peer = await daemon.connection();
    await expect.poll(() => peer.cancelled).toEqual(['providers/list']);
  });

  it('does not time out a start waiting for readiness unless startTimeoutMs is set', async () => {
    let release: (() => void) | undefined;
    const daemon = await fakeDaemon({
      handlers: {
        'subagent/start': () =>
          new Promise((resolve) => {
            release = () => resolve({ runId: 'run-slow', provider: 'spawn', id: 'child-slow', local: false, runToken: 't' });
          }),
      },
    });
    const service = await connect({ socket: daemon.socketPath, requestTimeoutMs: 50 });
    cleanup.push(() => service.close());
    const starting = service.start('spawn', {
      prompt: [{ type: 'text', text: 'hi' }],
      signal: new AbortController().signal,
      parent: { sessionId: 's', cwd: '/tmp' },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    release?.();
    await expect(starting).resolves.toMatchObject({ id: 'run-slow' });
  });

  it('applies startTimeoutMs to readiness when configured', async () => {
    const daemon = await fakeDaemon({ handlers: { 'subagent/start': () => new Promise(() => undefined) } });
    const service = await connect({ socket: daemon.socketPath, startTimeoutMs: 100 });
    cleanup.push(() => service.close());
    await expect(
      service.start('spawn', {
        prompt: [{ type: 'text', text: 'hi' }],
        signal: new AbortController().signal,
        parent: { sessionId: 's', cwd: '/tmp' },
      }),
    ).rejects.toMatchObject({ code: 'DAEMON_UNRESPONSIVE' });
  });
});

/** A daemon stand-in on stdio: answers initialize and start, then exits when asked to start. */
const STDIO_DAEMON = `
import { createRequire } from 'node:module';
const require = createRequire(process.env.REPO_PACKAGE_JSON);
const rpc = require('vscode-jsonrpc/node');
const connection = rpc.createMessageConnection(new rpc.StreamMessageReader(process.stdin), new rpc.StreamMessageWriter(process.stdout));
connection.onRequest('initialize', () => ({
  protocolVersion: '1.0.0',
  daemon: { name: 'subagentd', version: '0.1.0', pid: process.pid, startedAt: new Date().toISOString(), epoch: 'stdio-epoch' },
  providers: [{ name: 'spawn', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false }, inheritsParentContext: false, runtime: { sendMessage: false, resume: false } }],
}));
connection.onRequest('subagent/start', () => {
  setTimeout(() => { process.stderr.write('fatal: simulated crash\\n'); process.exit(3); }, 50);
  return { runId: 'run-stdio', provider: 'spawn', id: 'child-stdio', local: false, runToken: 'stdio-token' };
});
connection.listen();
`;

describe('connect: private stdio daemon', { timeout: 10_000 }, () => {
  it('resolves the default CLI to <repo>/dist/cli/main.js when running from source', () => {
    expect(defaultDaemonCliPath()).toBe(join(repoRoot, 'dist/cli/main.js'));
  });

  it('speaks JSON-RPC over the child stdio and reports its exit, with stderr, as DAEMON_UNAVAILABLE within 1 s', async () => {
    const dir = await tempDir();
    const script = join(dir, 'stdio-daemon.mjs');
    await writeFile(script, STDIO_DAEMON);
    const logger = captureLogger();
    const service = await connect({
      spawn: 'stdio',
      command: process.execPath,
      args: [script],
      env: { ...process.env, REPO_PACKAGE_JSON: join(repoRoot, 'package.json') },
      logger,
    });
    cleanup.push(() => service.close());
    expect(service.daemon.epoch).toBe('stdio-epoch');
    const run = await service.start('spawn', {
      prompt: [{ type: 'text', text: 'hi' }],
      signal: new AbortController().signal,
      parent: { sessionId: 's', cwd: '/tmp' },
    });
    const began = Date.now();
    const error = await run.result.catch((failure: unknown) => failure);
    expect(Date.now() - began).toBeLessThan(1000);
    expect(error).toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect((error as Error).message).toContain('private subagentd daemon');
    expect((error as Error).message).toContain('exited with code 3');
    expect((error as Error).message).toContain('simulated crash');
    await expect(run.dispose()).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
  });

  it('reports a command that cannot be spawned as DAEMON_UNAVAILABLE', async () => {
    const command = join(await tempDir(), 'no-such-binary');
    await expect(connect({ spawn: 'stdio', command })).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
  });
});

describe('connect: caller-supplied streams', { timeout: 5000 }, () => {
  it('runs the handshake over any reader/writer pair and fails pending calls when the stream ends', async () => {
    const toDaemon = new PassThrough();
    const toClient = new PassThrough();
    const peer = createMessageConnection(new StreamMessageReader(toDaemon), new StreamMessageWriter(toClient));
    peer.onRequest('initialize', () => ({ protocolVersion: PROTOCOL_VERSION, daemon: IDENTITY, providers: [] }));
    peer.onRequest('providers/list', () => new Promise(() => undefined));
    peer.listen();
    cleanup.push(async () => peer.dispose());
    const service = await connect({ stream: { reader: toClient, writer: toDaemon } });
    cleanup.push(() => service.close());
    expect(service.daemon).toEqual(IDENTITY);
    const pending = service.refreshProviders();
    toClient.end();
    await expect(pending).rejects.toMatchObject({ code: 'DAEMON_UNAVAILABLE' });
    expect(service.disconnected?.code).toBe('DAEMON_UNAVAILABLE');
  });
});
