/**
 * -0 as a depth (issue #10 item 10): JSON writes -0 as 0, so only the client can see it. It is
 * refused before anything is sent, with the daemon's words and field; a maxDepth the provider
 * cannot take stays UNSUPPORTED_CAPABILITY (the seam's order), and a local provider's start
 * checks the maxDepth value after its capabilities too.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect, SubagentError, type ClientStartRequest, type RemoteSubagentService } from '../client/index.js';
import type { SubagentRun } from '../protocol/index.js';
import { rejection } from './support/assertions.js';
import { FakeDaemon, captureLogger, descriptor } from './support/fake-daemon-peer.js';

let daemon: FakeDaemon;
let service: RemoteSubagentService;
afterEach(async () => {
  await service.close();
  await daemon.close();
});

async function setup(): Promise<void> {
  daemon = await FakeDaemon.start({ providers: [descriptor('capped', { caps: { depthLimit: true } }), descriptor('bare')] });
  service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
}

function request(overrides: Partial<ClientStartRequest> = {}): ClientStartRequest {
  return { prompt: [{ type: 'text', text: 't' }], signal: new AbortController().signal, parent: { sessionId: 'p', cwd: '/w' }, ...overrides };
}

describe('a -0 depth', { timeout: 5000 }, () => {
  it.each([
    [{ maxDepth: -0 }, '/maxDepth'],
    [{ parent: { sessionId: 'p', cwd: '/w', delegationDepth: -0 } }, '/parent/delegationDepth'],
    [{ parent: { sessionId: 'p', cwd: '/w', subagentDepth: -0 } }, '/parent/subagentDepth'],
  ])('%j is INVALID_REQUEST at the client, and nothing is sent', async (overrides, field) => {
    await setup();
    const error = await rejection(service.start('capped', request(overrides)));
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field } });
    expect((error as Error).message).toBe(`${field} must be a non-negative safe integer, got -0`);
    const peer = await daemon.connection();
    expect(peer.paramsOf('subagent/start')).toEqual([]);
  });

  it('keeps UNSUPPORTED_CAPABILITY first for a provider without depthLimit (the daemon says so)', async () => {
    await setup();
    const peer = await daemon.connection();
    // The client lets it through (this fake daemon accepts it): the capability check is the
    // daemon's, and comes before the maxDepth value in the seam's order.
    await service.start('bare', request({ maxDepth: -0 }));
    expect(peer.paramsOf('subagent/start')).toHaveLength(1);
  });

  it('a local provider refuses -0 after its capabilities', async () => {
    await setup();
    let called = 0;
    service.registerProvider({
      name: 'local-capped',
      capabilities: { outputSchema: false, depthLimit: true, toolFilter: false, persona: false },
      inheritsParentContext: false,
      start: (): Promise<SubagentRun> => {
        called += 1;
        return Promise.reject(new Error('not reached'));
      },
    });
    const error = await rejection(service.start('local-capped', request({ maxDepth: -0 })));
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/maxDepth' } });
    expect(called).toBe(0);
  });
});
