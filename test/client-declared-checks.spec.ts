/**
 * The client checks every request against its declaration (protocol/messages.ts) by itself:
 * params that fail are refused before anything is written, with the error the daemon would
 * answer, and a result that fails — an empty result included — rejects naming the field. The
 * daemon here is a real socket peer that answers whatever the test says.
 */
import { afterEach, expect, it } from 'vitest';
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { rejection } from './support/assertions.js';
import { FakeDaemon, captureLogger } from './support/fake-daemon-peer.js';

let daemon: FakeDaemon;
let service: RemoteSubagentService;
afterEach(async () => {
  await service?.close();
  await daemon?.close();
});

async function setup(handlers: Record<string, () => unknown>): Promise<void> {
  daemon = await FakeDaemon.start({ handlers });
  service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
}

it('params that fail the declaration are refused in the daemon’s words, and nothing is sent', { timeout: 10_000 }, async () => {
  await setup({ 'runs/list': () => ({ runs: [] }) });
  const error = await rejection(service.ops.runsPage({ limit: 0 }));
  expect(error).toBeInstanceOf(SubagentError);
  expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/limit' } });
  expect(error.message).toBe('invalid params for runs/list: /limit must be >= 1');
  const peer = await daemon.connection();
  expect(peer.wireCount('runs/list')).toBe(0);
  // The same call with valid params does cross the wire.
  await expect(service.ops.runsPage({ limit: 1 })).resolves.toEqual({ runs: [] });
  expect(peer.wireCount('runs/list')).toBe(1);
});

it('a result that fails the declaration rejects naming the field', { timeout: 10_000 }, async () => {
  await setup({ 'daemon/gc': () => ({ runsArchived: 1, runsRemoved: 0, sessionsRemoved: 0 }) });
  const error = await rejection(service.ops.gc());
  expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/runsStored' } });
  expect(error.message).toBe('the daemon sent an invalid answer to daemon/gc: /runsStored is required');
});

it('an empty result is checked too: daemon/shutdown answered with a field is refused', { timeout: 10_000 }, async () => {
  await setup({ 'daemon/shutdown': () => ({ stopping: true }) });
  const error = await rejection(service.ops.shutdown({ drain: true }));
  expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/stopping' } });
  expect(error.message).toBe('the daemon sent an invalid answer to daemon/shutdown: /stopping is not allowed');
});
