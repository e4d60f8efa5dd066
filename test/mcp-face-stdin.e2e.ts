/**
 * `subagentd mcp` under a host that misbehaves, spoken to by hand on its stdin: malformed JSON
 * gets -32700, a non-object -32600, a line over `limits.faceLineBytes` a -32600 for that very
 * call (its id read from the line's end, where the MCP SDK writes it) while the call in flight
 * and later calls are still answered; the end of stdin ends the face and cancels its run; and
 * after `subagentd stop` the face reconnecting does not start the daemon again.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RemoteSubagentService } from '../client/index.js';
import { CliSandbox, daemonPidsFor, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';
import { daemonOps, waitForRun } from './support/face-harness.js';
import { LinePeer } from './support/line-peer.js';

let box: CliSandbox;
let ops: RemoteSubagentService | undefined;

beforeAll(() => {
  box = new CliSandbox('subagentd-mcp-stdin-');
});
afterAll(async () => {
  await ops?.close();
  await box.cleanup();
});

async function openFace(steps: unknown[]): Promise<LinePeer> {
  const script = box.file(`child-${Date.now()}.json`, { steps });
  const peer = new LinePeer(box.spawn(['mcp', '--model', `scripted:${script}`], { timeoutMs: 120_000 }));
  const init = await peer.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-host', version: '1' } });
  expect(init.result?.serverInfo?.name).toBe('subagentd');
  peer.send({ method: 'notifications/initialized' });
  return peer;
}

it('answers malformed, non-object and oversize lines with JSON-RPC errors, and the calls in flight and later still', { timeout: HEAVY_TEST_MS }, async () => {
  const peer = await openFace([{ text: 'Working.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] }, { delayMs: 120_000, text: 'never', finish: 'stop' }]);

  // A call in flight: its child waits in a model step until cancelled.
  const slowId = peer.id();
  peer.send({ id: slowId, method: 'tools/call', params: { name: 'subagent', arguments: { description: 'Slow', prompt: 'Take your time' } } });
  ops ??= await daemonOps(box);
  const running = await waitForRun(ops, (r) => r.state === 'running', 'the slow run');

  peer.write('{"jsonrpc":"2.0","id":9,"method":\n');
  expect((await peer.nullAnswer(0)).error?.code).toBe(-32700);
  peer.write('[1,2,3]\n');
  expect((await peer.nullAnswer(1)).error?.code).toBe(-32600);
  peer.write('42\n');
  expect((await peer.nullAnswer(2)).error?.code).toBe(-32600);

  // 11 MiB: past the MCP SDK's own 10 MiB read buffer, and past the face's 4 MiB default. The id
  // comes last, as the SDK's client writes it.
  const bigId = peer.id();
  const prompt = 'x'.repeat(11 * 1024 * 1024);
  peer.write(`{"method":"tools/call","params":{"name":"subagent","arguments":{"description":"Big","prompt":"${prompt}"}},"jsonrpc":"2.0","id":${bigId}}\n`);
  const big = await peer.answer(bigId, 30_000, 'the oversize call');
  expect(big.error?.code).toBe(-32600);
  expect(big.error?.message).toContain('limits.faceLineBytes');
  expect(big.error?.message).toContain('4194304');

  const listed = await peer.request('tools/list', {});
  expect(listed.result?.tools.map((t: { name: string }) => t.name)).toContain('subagent');
  expect(peer.garbage).toEqual([]);

  // The host leaves: the face ends, and the call it still had is cancelled in the daemon (not
  // left to the detach grace, 60 s).
  peer.face.child.stdin.end();
  const exit = await peer.face.exited;
  expect(exit.code).toBe(0);
  const cancelled = await waitForRun(ops, (r) => r.runId === running.runId && r.stopReason === 'aborted', 'the slow run cancelled');
  expect(['settled', 'disposed']).toContain(cancelled.state);
});

it('does not start the daemon again after `subagentd stop`: reconnecting is not auto-starting', { timeout: HEAVY_TEST_MS }, async () => {
  await ops?.close();
  ops = undefined;
  const peer = await openFace([{ text: 'fine', finish: 'stop' }]);
  expect((await peer.request('tools/list', {})).result?.tools.length).toBeGreaterThan(0);
  expect(daemonPidsFor(box.socket)).toHaveLength(1);

  const stopped = await box.run(['stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
  // Three re-dials have failed by the time the face says so (100, 200, 400 ms apart); a face that
  // auto-started on reconnect would have a daemon up instead.
  await waitUntil(() => /reconnect attempt 3 of/.test(peer.face.stderr()) || daemonPidsFor(box.socket).length > 0, 30_000, 'three failed re-dials or a daemon');
  expect(daemonPidsFor(box.socket)).toEqual([]);

  // Nothing hangs meanwhile: a call is answered (an error: no daemon).
  const call = await peer.request('tools/call', { name: 'subagent', arguments: { description: 'x', prompt: 'y' } });
  expect(call.error ?? call.result?.isError).toBeTruthy();
  expect(daemonPidsFor(box.socket)).toEqual([]);
  peer.face.child.stdin.end();
  expect((await peer.face.exited).code).toBe(0);
});
