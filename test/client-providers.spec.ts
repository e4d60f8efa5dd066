import { afterEach, describe, expect, it } from 'vitest';
import {
  connect,
  SubagentError,
  type ClientStartRequest,
  type LocalSubagentProvider,
  type RemoteSubagentService,
  type ServiceEventMap,
  type SubagentResult,
  type SubagentRun,
} from '../client/index.js';
import { FakeDaemon, captureLogger, descriptor, until } from './support/fake-daemon-peer.js';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function setup(
  providers = [descriptor('spawn'), descriptor('fork', { inheritsParentContext: true })],
): Promise<{ daemon: FakeDaemon; service: RemoteSubagentService; logger: ReturnType<typeof captureLogger> }> {
  const daemon = await FakeDaemon.start({ providers });
  cleanup.push(() => daemon.close());
  const logger = captureLogger();
  const service = await connect({ socket: daemon.socketPath, logger });
  cleanup.push(() => service.close());
  return { daemon, service, logger };
}

function request(overrides: Partial<ClientStartRequest> = {}): ClientStartRequest {
  return {
    prompt: [{ type: 'text', text: 'task' }],
    signal: new AbortController().signal,
    parent: { sessionId: 'parent-1', cwd: '/work' },
    ...overrides,
  };
}

/** A local provider that records its calls and returns an already-settled run. */
function localProvider(
  name: string,
  capabilities: Partial<LocalSubagentProvider['capabilities']> = {},
  result: Promise<SubagentResult> = Promise.resolve({ output: [{ type: 'text', text: 'local out' }], stopReason: 'completed' }),
): LocalSubagentProvider & { calls: ClientStartRequest[] } {
  const calls: ClientStartRequest[] = [];
  return {
    name,
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false, ...capabilities },
    inheritsParentContext: false,
    calls,
    start: async (startRequest): Promise<SubagentRun> => {
      calls.push(startRequest);
      return { id: `local-child-${calls.length}`, localAgent: { fake: true }, result, dispose: async () => undefined };
    },
  };
}

describe('daemon providers', { timeout: 5000 }, () => {
  it('describes daemon providers from initialize, with runtime flags, and starts them over the wire', async () => {
    const { daemon, service } = await setup([descriptor('spawn', { sendMessage: true, caps: { persona: true } })]);
    const provider = service.getProvider('spawn');
    expect(provider).toMatchObject({
      name: 'spawn',
      capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: true },
      inheritsParentContext: false,
      runtime: { sendMessage: true, resume: false },
    });
    const run = await provider?.start(request());
    expect(run?.id).toBe('run-1');
    expect((await daemon.connection()).paramsOf('subagent/start')).toHaveLength(1);
    expect(service.getProvider('nope')).toBeUndefined();
  });

  it('keeps getProvider and list current from provider-added / -removed, and announces them', async () => {
    const { daemon, service } = await setup();
    const peer = await daemon.connection();
    const seen: Array<[string, unknown]> = [];
    service.on('subagent/provider-added', (event) => void seen.push(['added', event]));
    service.on('subagent/provider-removed', (event) => void seen.push(['removed', event]));

    await peer.notify('subagent/provider-added', { provider: descriptor('acp', { resume: true }) });
    await until(() => service.getProvider('acp') !== undefined, 1000, 'acp to appear');
    expect(service.list()).toEqual(['spawn', 'fork', 'acp']);
    expect(service.getProvider('acp')).toMatchObject({ runtime: { sendMessage: false, resume: true } });

    await peer.notify('subagent/provider-removed', { name: 'spawn' });
    await until(() => service.getProvider('spawn') === undefined, 1000, 'spawn to vanish');
    expect(service.list()).toEqual(['fork', 'acp']);
    await expect(service.start('spawn', request())).rejects.toMatchObject({ code: 'NO_PROVIDER' });
    expect(seen).toEqual([
      ['added', { provider: descriptor('acp', { resume: true }), origin: 'daemon' }],
      ['removed', { name: 'spawn', origin: 'daemon' }],
    ]);
  });

  it('refreshProviders adopts providers/list and announces only the differences', async () => {
    const { daemon, service } = await setup();
    const peer = await daemon.connection();
    peer.connection.onRequest('providers/list', () => ({ providers: [descriptor('fork', { inheritsParentContext: true }), descriptor('acp')] }));
    const seen: string[] = [];
    service.on('subagent/provider-added', ({ provider }) => void seen.push(`+${provider.name}`));
    service.on('subagent/provider-removed', ({ name }) => void seen.push(`-${name}`));
    const listed = await service.refreshProviders();
    expect(listed.map((provider) => provider.name)).toEqual(['fork', 'acp']);
    expect(service.list()).toEqual(['fork', 'acp']);
    expect(seen).toEqual(['-spawn', '+acp']);
  });

  it('logs and drops an invalid provider notification without disturbing the service', async () => {
    const { daemon, service, logger } = await setup();
    const peer = await daemon.connection();
    await peer.notify('subagent/provider-added', { provider: { name: 'broken', capabilities: {} } });
    await peer.notify('subagent/provider-added', { provider: descriptor('ok') });
    await until(() => service.getProvider('ok') !== undefined, 1000, 'the valid provider');
    expect(service.getProvider('broken')).toBeUndefined();
    expect(logger.lines.some((line) => line.includes('subagent/provider-added') && line.includes('/provider'))).toBe(true);
  });
});

describe('client-local providers', { timeout: 5000 }, () => {
  it('coexist with daemon providers: listed after them, started without a round trip', async () => {
    const { daemon, service } = await setup();
    const local = localProvider('inline');
    service.registerProvider(local);
    expect(service.list()).toEqual(['spawn', 'fork', 'inline']);
    expect(service.getProvider('inline')).toBe(local);
    const run = await service.start('inline', request());
    expect(run.id).toBe('local-child-1');
    expect(local.calls).toHaveLength(1);
    expect((await daemon.connection()).paramsOf('subagent/start')).toHaveLength(0);
  });

  it('refuses a name taken on either side with DUPLICATE_PROVIDER', async () => {
    const { service } = await setup();
    expect(() => service.registerProvider(localProvider('spawn'))).toThrow(SubagentError);
    expect(() => service.registerProvider(localProvider('spawn'))).toThrow(/daemon/);
    service.registerProvider(localProvider('inline'));
    let error: unknown;
    try {
      service.registerProvider(localProvider('inline'));
    } catch (failure) {
      error = failure;
    }
    expect(error).toMatchObject({ code: 'DUPLICATE_PROVIDER' });
  });

  it('checks capabilities in the seam order and never calls the provider on a failure', async () => {
    const { service } = await setup();
    const local = localProvider('inline', { toolFilter: true });
    service.registerProvider(local);
    const everything = request({
      outputSchema: { type: 'object' },
      maxDepth: 2,
      toolFilter: { allow: ['read'] },
      persona: 'terse',
    });
    await expect(service.start('inline', everything)).rejects.toMatchObject({
      code: 'UNSUPPORTED_CAPABILITY',
      message: expect.stringContaining('outputSchema'),
    });
    const { outputSchema: _schema, ...noSchema } = everything;
    await expect(service.start('inline', noSchema)).rejects.toMatchObject({ message: expect.stringContaining('depthLimit') });
    const { maxDepth: _depth, ...noDepth } = noSchema;
    // toolFilter is supported, so the next missing one is persona.
    await expect(service.start('inline', noDepth)).rejects.toMatchObject({ message: expect.stringContaining('persona') });
    expect(local.calls).toHaveLength(0);
  });

  it('emits subagent/start then subagent/end with one minted run id, even for a settled child', async () => {
    const { service } = await setup();
    service.registerProvider(localProvider('inline'));
    const events: Array<[string, ServiceEventMap['subagent/end'] | ServiceEventMap['subagent/start']]> = [];
    service.on('subagent/start', (event) => void events.push(['start', event]));
    service.on('subagent/end', (event) => void events.push(['end', event]));
    const run = await service.start('inline', request());
    await run.result;
    await until(() => events.length === 2, 1000, 'the end event');
    const [start, end] = events;
    expect(start?.[0]).toBe('start');
    expect(end?.[0]).toBe('end');
    expect(start?.[1]).toMatchObject({ provider: 'inline', id: 'local-child-1', local: true });
    expect(end?.[1]).toMatchObject({
      runId: start?.[1].runId,
      stopReason: 'completed',
      lastAssistantMessage: [{ type: 'text', text: 'local out' }],
    });
    expect(start?.[1].runId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('removal blocks new starts but leaves accepted runs alone', async () => {
    const { service } = await setup();
    let settle: ((result: SubagentResult) => void) | undefined;
    const local = localProvider('inline', {}, new Promise((resolve) => (settle = resolve)));
    const removed: string[] = [];
    service.on('subagent/provider-removed', ({ name, origin }) => void removed.push(`${origin}:${name}`));
    const dispose = service.registerProvider(local);
    const run = await service.start('inline', request());
    dispose();
    dispose();
    expect(removed).toEqual(['local:inline']);
    expect(service.list()).toEqual(['spawn', 'fork']);
    await expect(service.start('inline', request())).rejects.toMatchObject({ code: 'NO_PROVIDER' });
    settle?.({ output: [], stopReason: 'completed' });
    await expect(run.result).resolves.toEqual({ output: [], stopReason: 'completed' });
    // The name is free again.
    service.registerProvider(localProvider('inline'));
  });

  it('rejects an already-aborted start with ABORTED without calling the provider', async () => {
    const { service } = await setup();
    const local = localProvider('inline');
    service.registerProvider(local);
    const controller = new AbortController();
    controller.abort();
    await expect(service.start('inline', request({ signal: controller.signal }))).rejects.toMatchObject({ code: 'ABORTED' });
    expect(local.calls).toHaveLength(0);
  });
});

describe('listener containment', { timeout: 5000 }, () => {
  it('a throwing or rejecting listener is logged and does not starve the others or change the run', async () => {
    const { daemon, service, logger } = await setup();
    const peer = await daemon.connection();
    const reached: string[] = [];
    service.on('subagent/start', () => {
      throw new Error('sync boom');
    });
    service.on('subagent/start', async () => {
      throw new Error('async boom');
    });
    service.on('subagent/start', (event) => void reached.push(`start:${event.runId}`));
    service.on('subagent/end', () => {
      throw new Error('end boom');
    });
    service.on('subagent/end', (event) => void reached.push(`end:${event.runId}`));
    const run = await service.start('spawn', request());
    await peer.finishRun(run.id);
    await expect(run.result).resolves.toMatchObject({ stopReason: 'completed' });
    await until(() => reached.length === 2, 1000, 'both listeners');
    expect(reached).toEqual(['start:run-1', 'end:run-1']);
    await until(() => logger.lines.length >= 3, 1000, 'three logged failures');
    expect(logger.lines.join('\n')).toMatch(/sync boom[\s\S]*async boom|async boom[\s\S]*sync boom/);
    expect(logger.lines.join('\n')).toContain('end boom');
  });

  it('on returns an unsubscribe', async () => {
    const { daemon, service } = await setup();
    const peer = await daemon.connection();
    const seen: string[] = [];
    const off = service.on('subagent/start', (event) => void seen.push(event.runId));
    const first = await service.start('spawn', request());
    await peer.finishRun(first.id);
    await first.result;
    off();
    const second = await service.start('spawn', request());
    await peer.finishRun(second.id);
    await second.result;
    expect(seen).toEqual(['run-1']);
  });
});
