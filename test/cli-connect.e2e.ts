/**
 * `subagentd connect` as an editor extension uses it: this test process is the editor. It spawns
 * `connect`, speaks LSP-framed JSON-RPC on its stdin/stdout without knowing any token, and shares
 * the daemon that `connect` found, or started.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PROTOCOL_VERSION, type StatusResult } from '../protocol/index.js';
import { CliSandbox, daemonPidsFor, EXAMPLES, HEAVY_TEST_MS, pidAlive } from './support/cli-harness.js';
import { StdioLspPeer } from './support/cli-lsp-peer.js';

const HELLO = `scripted:${join(EXAMPLES, 'hello.json')}`;

let box: CliSandbox;
beforeAll(() => {
  box = new CliSandbox('subagentd-cli-connect-');
});
afterAll(async () => {
  await box.run(['stop'], { timeoutMs: 15_000 });
  await box.cleanup();
});

it('relays an editor session to the daemon it auto-started, injecting the token, and leaves the daemon running when stdin closes', { timeout: HEAVY_TEST_MS }, async () => {
  expect(existsSync(box.socket)).toBe(false);
  expect(daemonPidsFor(box.socket)).toEqual([]);

  const connect = box.spawn(['connect'], { timeoutMs: 30_000 });
  const editor = new StdioLspPeer(connect.child.stdin, connect.child.stdout);

  // No token in initialize: the daemon requires one, and connect adds it.
  const init = await editor.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'editor-test', version: '1' } }, 20_000);
  expect(init.error, JSON.stringify(init.error)).toBeUndefined();
  const daemon = (init.result as { daemon: { pid: number; epoch: string } }).daemon;
  expect(daemon.pid).not.toBe(connect.child.pid); // a separate, shared daemon...
  expect(daemonPidsFor(box.socket)).toEqual([daemon.pid]); // ...started by connect for this socket
  expect(existsSync(`${box.socket}.token`)).toBe(true);

  const list = await editor.request('providers/list', {});
  expect((list.result as { providers: Array<{ name: string }> }).providers.map((p) => p.name)).toEqual(['spawn', 'fork']);

  // A delegation: the reply (to a 1.3 client it is the start notice too), then the end notification.
  const started = await editor.request('subagent/start', {
    provider: 'spawn',
    prompt: [{ type: 'text', text: 'Summarise this repository' }],
    parent: { sessionId: 'editor-session', cwd: box.work },
    agentOptions: { model: HELLO },
  });
  expect(started.error, JSON.stringify(started.error)).toBeUndefined();
  const runId = (started.result as { runId: string }).runId;
  expect(runId).toMatch(/^run_/);
  const endNote = await editor.next((m) => m.method === 'subagent/end' && (m.params as { runId?: string }).runId === runId, 15_000, 'subagent/end');
  expect(endNote.params).toMatchObject({ runId, stopReason: 'completed' });
  expect(JSON.stringify(endNote.params)).toContain('This repository is subagentd');

  // A child that is still working while another process asks the daemon about its connections.
  const slow = box.file('slow.json', { steps: [{ delayMs: 60_000, text: 'never reached', finish: 'stop' }] });
  const long = await editor.request('subagent/start', {
    provider: 'spawn',
    prompt: [{ type: 'text', text: 'keep working' }],
    parent: { sessionId: 'editor-session', cwd: box.work },
    agentOptions: { model: `scripted:${slow}` },
  });
  expect(long.error, JSON.stringify(long.error)).toBeUndefined();
  const longId = (long.result as { runId: string }).runId;

  const attached = await box.run(['status', '--json']);
  expect(attached.code, attached.stderr).toBe(0);
  const during = JSON.parse(attached.stdout) as StatusResult;
  expect(during.daemon.pid).toBe(daemon.pid);
  expect(during.connections).toBeGreaterThanOrEqual(2); // the editor's, through connect, and status's own
  expect(Object.values(during.admission.byConnection)).toEqual([{ client: 'editor-test@1', running: 1, queued: 0 }]);

  const cancelled = await editor.request('run/cancel', { runId: longId });
  expect(cancelled.error, JSON.stringify(cancelled.error)).toBeUndefined();
  const aborted = await editor.next((m) => m.method === 'subagent/end' && (m.params as { runId?: string }).runId === longId, 10_000, 'subagent/end of the cancelled run');
  expect(aborted.params).toMatchObject({ runId: longId, stopReason: 'aborted' });

  // The editor goes away: connect ends cleanly, the daemon stays for the next client.
  connect.child.stdin.end();
  const exit = await connect.exited;
  expect(exit.code, exit.stderr).toBe(0);
  expect(exit.stderr).toBe('');
  expect(editor.violations).toEqual([]); // stdout carried protocol frames only

  expect(pidAlive(daemon.pid)).toBe(true);
  const after = await box.status();
  expect(after?.daemon).toMatchObject({ pid: daemon.pid, epoch: daemon.epoch });
  expect(after?.connections).toBeLessThan(during.connections);
  expect(after?.admission.byConnection).toEqual({});
});

it('a second connect joins the running daemon instead of starting another', async () => {
  const before = daemonPidsFor(box.socket);
  expect(before).toHaveLength(1);
  const connect = box.spawn(['connect'], { timeoutMs: 20_000 });
  const editor = new StdioLspPeer(connect.child.stdin, connect.child.stdout);
  const init = await editor.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'editor-two', version: '1' } }, 15_000);
  expect(init.error, JSON.stringify(init.error)).toBeUndefined();
  expect((init.result as { daemon: { pid: number } }).daemon.pid).toBe(before[0]);
  connect.child.stdin.end();
  expect((await connect.exited).code).toBe(0);
  expect(daemonPidsFor(box.socket)).toEqual(before);
  expect(box.readFile(join(box.stateDir, 'daemon.stderr.log')).match(/listening on/g)).toHaveLength(1);
});

it('injects the token into the initialize that is accepted, after a malformed first one; exits 1 when the daemon goes away', { timeout: HEAVY_TEST_MS }, async () => {
  const connect = box.spawn(['connect'], { timeoutMs: 30_000 });
  const editor = new StdioLspPeer(connect.child.stdin, connect.child.stdout);
  const bad = await editor.request('initialize', { protocolVersion: PROTOCOL_VERSION }, 15_000); // no clientInfo
  expect(bad.error?.data).toMatchObject({ code: 'INVALID_REQUEST' });
  const good = await editor.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'editor-retry', version: '1' } }, 15_000);
  expect(good.error, JSON.stringify(good.error)).toBeUndefined();
  const pid = (good.result as { daemon: { pid: number } }).daemon.pid;
  const list = await editor.request('providers/list', {});
  expect(list.error).toBeUndefined();

  // The daemon goes away under it: connect does not linger as a dead relay.
  const stop = await box.run(['stop']);
  expect(stop.code, stop.stderr).toBe(0);
  const exit = await connect.exited;
  expect(exit.code).toBe(1);
  expect(exit.stderr).toBe(`subagentd connect: the daemon at ${box.socket} closed the connection; restart the relay to reconnect\n`);
  expect(pidAlive(pid)).toBe(false);
});
