/**
 * The loopback TCP listener (bearer token from a private file) and idle shutdown, on real
 * daemon processes.
 */
import { spawn } from 'node:child_process';
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { CLI, makeTempDir, startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const daemons: DaemonProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A temp dir this file removes after each test. */
function tempDir(): string {
  const dir = makeTempDir();
  dirs.push(dir);
  return dir;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The daemon opens TCP after its unix socket (which startDaemon waits for): retry a refused dial. */
async function tcpPeer(port: number): Promise<RawPeer> {
  for (let attempt = 0; ; attempt++) {
    const socket = createConnection(port, '127.0.0.1');
    const error = await new Promise<Error | undefined>((resolve) => {
      socket.once('connect', () => resolve(undefined));
      socket.once('error', resolve);
    });
    if (error === undefined) return RawPeer.fromSocket(socket);
    if (attempt >= 200) throw error;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

it('TCP requires the bearer token and refuses every method before initialize', async () => {
  const dir = tempDir();
  const tokenFile = join(dir, 'tcp.token');
  writeFileSync(tokenFile, 'a-long-random-bearer-token-for-tests\n', { mode: 0o600 });
  const port = await freePort();
  const daemon = await startDaemon({ tcp: { port, tokenFile } });
  daemons.push(daemon);
  const peer = await tcpPeer(port);
  expect((await peer.request('providers/list', {})).error?.data?.code).toBe('NOT_INITIALIZED');
  const unix = (await import('node:fs')).readFileSync(`${daemon.socket}.token`, 'utf8').trim();
  const wrong = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 't', version: '0' }, token: unix });
  expect(wrong.error?.data?.code).toBe('UNAUTHORIZED');
  const ok = await peer.request('initialize', {
    protocolVersion: PROTOCOL_VERSION,
    clientInfo: { name: 't', version: '0' },
    token: 'a-long-random-bearer-token-for-tests',
  });
  expect(ok.result).toMatchObject({ daemon: { pid: daemon.proc.pid } });
  const started = await peer.request('subagent/start', { provider: 'echo', prompt: [{ type: 'text', text: 'echo tcp' }], parent: { sessionId: 's', cwd: '/tmp' } });
  expect(started.error).toBeUndefined();
  peer.close();
});

it.each([
  ['a token file others can read', { mode: 0o644, host: '127.0.0.1' }, /lets others read it/],
  ['a non-loopback address', { mode: 0o600, host: '0.0.0.0' }, /loopback addresses only/],
])('refuses to start with %s', async (_name, { mode, host }, message) => {
  const dir = tempDir();
  const tokenFile = join(dir, 'tcp.token');
  writeFileSync(tokenFile, 'a-long-random-bearer-token-for-tests\n');
  chmodSync(tokenFile, mode);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ tcp: { host, port: 0, tokenFile } }));
  const proc = spawn(process.execPath, [CLI, 'daemon', '--socket', join(dir, 'run', 's.sock'), '--state-dir', join(dir, 'state'), '--config', config], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const guard = setTimeout(() => proc.kill('SIGKILL'), 10_000); // never leave it behind
  expect(await new Promise((resolve) => proc.once('exit', resolve))).toBe(1);
  clearTimeout(guard);
  expect(err).toMatch(message);
});

it('exits when idle, but not while a client is connected', async () => {
  const daemon = await startDaemon({}, ['--idle-timeout', '1']);
  daemons.push(daemon);
  const exited = new Promise<number | null>((resolve) => daemon.proc.once('exit', resolve));
  const peer = await RawPeer.initialized(daemon.socket);
  await new Promise((r) => setTimeout(r, 1800));
  expect(daemon.proc.exitCode).toBeNull();
  peer.close();
  const t0 = Date.now();
  expect(await exited).toBe(0);
  expect(Date.now() - t0).toBeLessThan(5000);
});
