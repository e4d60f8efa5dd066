import { afterEach, describe, expect, it } from 'vitest';
import {
  connect,
  RunFaultError,
  SubagentError,
  type ClientStartRequest,
  type ConnectOptions,
  type RemoteSubagentRun,
  type RemoteSubagentService,
  type RunEvent,
} from '../client/index.js';
import {
  COMPLETED,
  FakeDaemon,
  captureLogger,
  daemonError,
  delay,
  descriptor,
  until,
  type FakeDaemonOptions,
  type PeerConnection,
} from './support/fake-daemon-peer.js';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

interface Setup {
  daemon: FakeDaemon;
  peer: PeerConnection;
  service: RemoteSubagentService;
  logger: ReturnType<typeof captureLogger>;
}

async function setup(options: FakeDaemonOptions = {}, connectOptions: Partial<ConnectOptions> = {}): Promise<Setup> {
  const daemon = await FakeDaemon.start(options);
  cleanup.push(() => daemon.close());
  const logger = captureLogger();
  const service = await connect({ socket: daemon.socketPath, logger, ...connectOptions } as ConnectOptions);
  cleanup.push(() => service.close());
  return { daemon, peer: await daemon.connection(), service, logger };
}

function request(overrides: Partial<ClientStartRequest> = {}): ClientStartRequest {
  return {
    prompt: [{ type: 'text', text: 'task' }],
    signal: new AbortController().signal,
    parent: { sessionId: 'parent-1', cwd: '/work' },
    ...overrides,
  };
}

async function startRemote(service: RemoteSubagentService, overrides: Partial<ClientStartRequest> = {}, name = 'spawn'): Promise<RemoteSubagentRun> {
  return (await service.start(name, request(overrides))) as RemoteSubagentRun;
}

describe('start and result', { timeout: 5000 }, () => {
  it('returns a run for the StartResult and resolves result from subagent/end', async () => {
    const { peer, service } = await setup();
    const events: string[] = [];
    service.on('subagent/start', (event) => void events.push(`start:${event.runId}:${event.id}`));
    service.on('subagent/end', (event) => void events.push(`end:${event.runId}:${event.stopReason}`));
    const run = await startRemote(service);
    expect(run).toMatchObject({ id: 'run-1', childId: 'child-run-1', runToken: 'token-run-1', localAgent: undefined, provider: 'spawn' });
    let settled = false;
    void run.result.then(() => (settled = true));
    await delay(30);
    expect(settled).toBe(false);
    const result = { output: [{ type: 'text' as const, text: 'answer' }], stopReason: 'max-tokens', diagnostic: 'ran out' };
    await peer.finishRun('run-1', result);
    await expect(run.result).resolves.toEqual(result);
    await until(() => events.length === 2, 1000, 'lifecycle events');
    expect(events).toEqual(['start:run-1:child-run-1', 'end:run-1:max-tokens']);
  });

  it('sends only present fields, strips execute from tools, and asks to stream when onEvent is given', async () => {
    const { peer, service } = await setup();
    await startRemote(service, {
      agentOptions: { model: 'deepseek-chat' },
      maxDepth: 3,
      persona: 'terse',
      env: { TOKEN_FREE: '1' },
      tools: [{ name: 'lookup', description: 'Look up', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) }],
      onEvent: () => undefined,
    });
    expect(peer.paramsOf('subagent/start')).toEqual([
      {
        provider: 'spawn',
        prompt: [{ type: 'text', text: 'task' }],
        parent: { sessionId: 'parent-1', cwd: '/work' },
        agentOptions: { model: 'deepseek-chat' },
        maxDepth: 3,
        persona: 'terse',
        env: { TOKEN_FREE: '1' },
        tools: [{ name: 'lookup', description: 'Look up', inputSchema: { type: 'object' } }],
        stream: true,
        // A fresh key per start (the same start sent again after a reconnect keeps it).
        idempotencyKey: expect.stringMatching(/^[0-9a-f-]{36}$/),
      },
    ]);
  });

  it('rethrows a daemon start error with its seam code and details', async () => {
    const { service } = await setup({
      handlers: {
        'subagent/start': () => daemonError('DEPTH_EXCEEDED', 'child depth 4 exceeds maxDepth 3', { attemptedDepth: 4, maxDepth: 3 }),
      },
    });
    const error = await startRemote(service, { maxDepth: 3 }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({ code: 'DEPTH_EXCEEDED', details: { attemptedDepth: 4, maxDepth: 3 } });
  });

  it('rejects an invalid StartResult with INVALID_REQUEST naming the field', async () => {
    const { service } = await setup({ handlers: { 'subagent/start': () => ({ provider: 'spawn', id: 'c', local: false, runToken: 't' }) } });
    await expect(startRemote(service)).rejects.toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/runId' } });
  });

  it('rejects result with RunFaultError when the daemon reports an infrastructure fault', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service);
    await peer.notify('subagent/end', { runId: run.id, provider: 'spawn', id: run.childId, local: false, stopReason: 'error', error: { message: 'store corrupted' } });
    const error = await run.result.catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(RunFaultError);
    expect(error).toMatchObject({ runId: 'run-1', message: 'store corrupted' });
  });

  it('an invalid subagent/end is never lost: the result rejects typed, naming the field; an invalid run/event is dropped', async () => {
    const { peer, service, logger } = await setup();
    const run = await startRemote(service);
    await peer.notify('subagent/end', { runId: run.id, provider: 'spawn', local: false, stopReason: 'completed', result: COMPLETED });
    await peer.notify('run/event', { runId: run.id, event: { kind: 'nonsense' } });
    await until(() => logger.lines.length >= 2, 1000, 'two logged refusals');
    expect(logger.lines[0]).toContain('subagent/end');
    expect(logger.lines[0]).toContain('/id');
    const error = await run.result.then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/id' } });
    // The run is over; a later end changes nothing.
    await peer.finishRun(run.id);
    await expect(run.result).rejects.toBe(error);
  });

  it('wait() asks run/wait and settles result from the answer', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service);
    await expect(run.wait()).resolves.toEqual(COMPLETED);
    await expect(run.result).resolves.toEqual(COMPLETED);
    expect(peer.paramsOf('run/wait')).toEqual([{ runId: 'run-1' }]);
  });
});

describe('runtime capabilities by presence', { timeout: 5000 }, () => {
  it('leaves sendMessage and resume off a run whose provider lacks them', async () => {
    const { service } = await setup({ providers: [descriptor('spawn')] });
    const run = await startRemote(service);
    expect('sendMessage' in run).toBe(false);
    expect('resume' in run).toBe(false);
  });

  it('adds them when the descriptor advertises them; sendMessage and resume go over the wire', async () => {
    const { peer, service } = await setup({ providers: [descriptor('spawn', { sendMessage: true, resume: true })] });
    const run = await startRemote(service);
    expect('sendMessage' in run).toBe(true);
    expect('resume' in run).toBe(true);
    run.sendMessage?.([{ type: 'text', text: 'also check tests' }]);
    await until(() => peer.paramsOf('run/sendMessage').length === 1, 1000, 'run/sendMessage');
    expect(peer.paramsOf('run/sendMessage')).toEqual([{ runId: 'run-1', content: [{ type: 'text', text: 'also check tests' }] }]);
    const next = await run.resume?.([{ type: 'text', text: 'continue' }]);
    expect(peer.paramsOf('run/resume')).toEqual([{ runId: 'run-1', prompt: [{ type: 'text', text: 'continue' }] }]);
    expect(next?.id).toBe('run-2');
    expect(next && 'resume' in next).toBe(true);
  });

  it('reports a failed sendMessage to the logger (the seam method returns nothing)', async () => {
    const { peer, service, logger } = await setup({
      providers: [descriptor('spawn', { sendMessage: true })],
      handlers: { 'run/sendMessage': () => daemonError('RUN_STATE', 'run-1 already settled') },
    });
    const run = await startRemote(service);
    expect(run.sendMessage?.([{ type: 'text', text: 'late' }])).toBeUndefined();
    await until(() => logger.lines.length === 1, 1000, 'the logged failure');
    expect(logger.lines[0]).toContain('sendMessage to run run-1 failed');
    expect(logger.lines[0]).toContain('already settled');
    expect(peer.paramsOf('run/sendMessage')).toHaveLength(1);
  });
});

describe('cancellation', { timeout: 5000 }, () => {
  it('an already-aborted signal rejects at once with ABORTED and sends nothing', async () => {
    const { peer, service } = await setup();
    const controller = new AbortController();
    controller.abort();
    await expect(startRemote(service, { signal: controller.signal })).rejects.toMatchObject({ code: 'ABORTED' });
    await delay(20);
    expect(peer.wireCount('subagent/start')).toBe(0);
  });

  it('a start the daemon does not answer in startTimeoutMs rejects DAEMON_UNRESPONSIVE and is cancelled on the wire, once', async () => {
    const { peer, service } = await setup(
      { handlers: { 'subagent/start': () => new Promise(() => undefined) } },
      { startTimeoutMs: 150 },
    );
    const error = await startRemote(service).catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: 'DAEMON_UNRESPONSIVE' });
    expect((error as Error).message).toMatch(/did not answer subagent\/start within 150 ms/);
    await until(() => peer.cancelled.length > 0, 1000, 'the cancel to arrive');
    expect(peer.cancelled).toEqual(['subagent/start']);
    expect(peer.wireCount('$/cancelRequest')).toBe(1);
  });

  it('an abort before readiness cancels the pending start ($/cancelRequest) and rejects with the daemon answer', async () => {
    const { peer, service } = await setup({
      handlers: {
        'subagent/start': (_params: unknown, { token }) =>
          new Promise((resolve) => {
            token.onCancellationRequested(() => resolve(daemonError('ABORTED', 'start cancelled before the child was ready')));
          }),
      },
    });
    const controller = new AbortController();
    const starting = startRemote(service, { signal: controller.signal });
    await until(() => peer.requests.some((entry) => entry.method === 'subagent/start'), 1000, 'the start to arrive');
    controller.abort();
    const error = await starting.catch((failure: unknown) => failure);
    expect(error).toMatchObject({ code: 'ABORTED', message: 'start cancelled before the child was ready' });
    expect(peer.cancelled).toEqual(['subagent/start']);
    expect(peer.wireCount('$/cancelRequest')).toBe(1);
    expect(peer.wireCount('run/cancel')).toBe(0);
  });

  it('an abort after readiness sends run/cancel for the run, once', async () => {
    const { peer, service } = await setup();
    const controller = new AbortController();
    const run = await startRemote(service, { signal: controller.signal });
    controller.abort();
    await until(() => peer.paramsOf('run/cancel').length === 1, 1000, 'run/cancel');
    expect(peer.paramsOf('run/cancel')).toEqual([{ runId: run.id }]);
    expect(peer.wireCount('$/cancelRequest')).toBe(0);
    await peer.finishRun(run.id, { output: [], stopReason: 'aborted' });
    await expect(run.result).resolves.toMatchObject({ stopReason: 'aborted' });
  });

  it('an abort after the run settled sends nothing', async () => {
    const { peer, service } = await setup();
    const controller = new AbortController();
    const run = await startRemote(service, { signal: controller.signal });
    await peer.finishRun(run.id);
    await run.result;
    controller.abort();
    await delay(30);
    expect(peer.wireCount('run/cancel')).toBe(0);
  });
});

describe('dispose', { timeout: 5000 }, () => {
  it('is idempotent: one run/dispose on the wire however often it is called', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service);
    const first = run.dispose();
    const second = run.dispose();
    expect(second).toBe(first);
    await Promise.all([first, second, run.dispose()]);
    await run.dispose();
    await delay(20);
    expect(peer.wireCount('run/dispose')).toBe(1);
    expect(peer.paramsOf('run/dispose')).toEqual([{ runId: run.id }]);
  });

  it('after dispose, an abort no longer sends run/cancel', async () => {
    const { peer, service } = await setup();
    const controller = new AbortController();
    const run = await startRemote(service, { signal: controller.signal });
    await run.dispose();
    controller.abort();
    await delay(30);
    expect(peer.wireCount('run/cancel')).toBe(0);
  });
});

describe('client-hosted tools', { timeout: 5000 }, () => {
  const lookup = {
    name: 'lookup',
    description: 'Look a key up',
    inputSchema: { type: 'object' },
    execute: (args: unknown) => ({ content: [{ type: 'text' as const, text: `value of ${JSON.stringify(args)}` }] }),
  };
  const failing = {
    name: 'fails',
    description: 'Always throws',
    inputSchema: { type: 'object' },
    execute: () => {
      throw new Error('disk full');
    },
  };

  it('serves tool/call with the declared tool, and turns a throw into an isError result', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service, { tools: [lookup, failing] });
    await expect(peer.request('tool/call', { runId: run.id, callId: 'c1', name: 'lookup', arguments: { key: 'k' } })).resolves.toEqual({
      content: [{ type: 'text', text: 'value of {"key":"k"}' }],
    });
    await expect(peer.request('tool/call', { runId: run.id, callId: 'c2', name: 'fails', arguments: {} })).resolves.toEqual({
      content: [{ type: 'text', text: 'disk full' }],
      isError: true,
    });
  });

  it('answers unknown runs, undeclared tools and invalid params with JSON-RPC errors', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service, { tools: [lookup] });
    await expect(peer.request('tool/call', { runId: 'run-zzz', callId: 'c', name: 'lookup', arguments: {} })).rejects.toMatchObject({
      data: { code: 'UNKNOWN_RUN' },
    });
    await expect(peer.request('tool/call', { runId: run.id, callId: 'c', name: 'other', arguments: {} })).rejects.toMatchObject({
      data: { code: 'INVALID_REQUEST', field: '/name' },
    });
    await expect(peer.request('tool/call', { runId: run.id, name: 'lookup' })).rejects.toMatchObject({
      code: -32602,
      data: { code: 'INVALID_REQUEST', field: '/callId' },
    });
  });

  it('serves a tool/call that arrives before the start answer is processed', async () => {
    const { peer, service } = await setup({
      handlers: {
        'subagent/start': async (_params: unknown, context) => {
          // The child calls its tool before the daemon answers the start.
          const answer = context.peer.request('tool/call', { runId: 'run-early', callId: 'c', name: 'lookup', arguments: 1 });
          answers.push(answer);
          return { runId: 'run-early', provider: 'spawn', id: 'child-early', local: false, runToken: 'token-early' };
        },
      },
    });
    const answers: Array<Promise<unknown>> = [];
    const run = await startRemote(service, { tools: [lookup] });
    expect(run.id).toBe('run-early');
    await expect(answers[0]).resolves.toEqual({ content: [{ type: 'text', text: 'value of 1' }] });
    expect(peer.requests.map((entry) => entry.method)).toContain('subagent/start');
  });

  it('aborts a running tool when the daemon cancels the call', async () => {
    const { peer, service } = await setup();
    let sawAbort = false;
    const slow = {
      name: 'slow',
      description: 'Waits for its signal',
      inputSchema: { type: 'object' },
      execute: (_args: unknown, { signal }: { signal: AbortSignal }) =>
        new Promise<{ content: [] }>((resolve) => {
          signal.addEventListener('abort', () => {
            sawAbort = true;
            resolve({ content: [] });
          });
        }),
    };
    const run = await startRemote(service, { tools: [slow] });
    const { CancellationTokenSource } = await import('vscode-jsonrpc/node');
    const source = new CancellationTokenSource();
    const call = peer.connection.sendRequest('tool/call', { runId: run.id, callId: 'c', name: 'slow', arguments: {} }, source.token);
    await delay(20);
    source.cancel();
    await expect(call).resolves.toEqual({ content: [] });
    expect(sawAbort).toBe(true);
  });
});

describe('streamed events and permissions', { timeout: 5000 }, () => {
  it('routes run/event to the run onEvent, containing its exceptions', async () => {
    const { peer, service, logger } = await setup();
    const seen: RunEvent[] = [];
    const run = await startRemote(service, {
      onEvent: (event) => {
        seen.push(event);
        if (seen.length === 1) throw new Error('ui crashed');
      },
    });
    await peer.notify('run/event', { runId: run.id, event: { kind: 'text-delta', text: 'Hel' } });
    await peer.notify('run/event', { runId: run.id, event: { kind: 'text-delta', text: 'lo' } });
    await until(() => seen.length === 2, 1000, 'two events');
    expect(seen).toEqual([
      { kind: 'text-delta', text: 'Hel' },
      { kind: 'text-delta', text: 'lo' },
    ]);
    expect(logger.lines.some((line) => line.includes('ui crashed'))).toBe(true);
  });

  it('unpacks run/events batches in order, across runs, as lone run/events would arrive', async () => {
    const { peer, service } = await setup();
    const seen: string[] = [];
    const first = await startRemote(service, { onEvent: (event) => void seen.push(`1:${(event as { text: string }).text}`) });
    const second = await startRemote(service, { onEvent: (event) => void seen.push(`2:${(event as { text: string }).text}`) });
    const delta = (text: string): RunEvent => ({ kind: 'text-delta', text });
    await peer.notify('run/events', {
      runs: [
        { runId: first.id, events: [delta('a'), delta('b')] },
        { runId: second.id, events: [delta('c')] },
        { runId: first.id, events: [delta('d')] },
      ],
    });
    await peer.notify('run/event', { runId: second.id, event: delta('e') });
    await until(() => seen.length === 5, 1000, 'five events');
    expect(seen).toEqual(['1:a', '1:b', '2:c', '1:d', '2:e']);
  });

  it('drops only the invalid events of a run/events batch, delivering the rest in order', async () => {
    const { peer, service, logger } = await setup();
    const seen: RunEvent[] = [];
    const run = await startRemote(service, { onEvent: (event) => void seen.push(event) });
    await peer.notify('run/events', {
      runs: [{ runId: run.id, events: [{ kind: 'text-delta', text: 'kept' }, { kind: 'nonsense' }, { kind: 'reasoning-delta', text: 'also kept' }] }],
    });
    await until(() => seen.length === 2, 1000, 'the two valid events');
    expect(seen).toEqual([
      { kind: 'text-delta', text: 'kept' },
      { kind: 'reasoning-delta', text: 'also kept' },
    ]);
    expect(logger.lines.some((line) => line.includes('run/events'))).toBe(true);
    expect(logger.lines.filter((line) => line.includes('dropped an invalid event'))).toHaveLength(1);
  });

  it('answers permission/request with cancelled when no handler is configured', async () => {
    const { peer, service } = await setup();
    const run = await startRemote(service);
    await expect(
      peer.request('permission/request', { runId: run.id, title: 'rm -rf', options: [{ optionId: 'ok', name: 'Allow', kind: 'allow_once' }] }),
    ).resolves.toEqual({ outcome: 'cancelled' });
  });

  it('asks the configured onPermission handler', async () => {
    const asked: string[] = [];
    const { peer, service } = await setup({}, {
      onPermission: (params) => {
        asked.push(params.title);
        return { outcome: 'selected', optionId: 'ok' };
      },
    });
    const run = await startRemote(service);
    await expect(
      peer.request('permission/request', { runId: run.id, title: 'write file', options: [{ optionId: 'ok', name: 'Allow', kind: 'allow_once' }] }),
    ).resolves.toEqual({ outcome: 'selected', optionId: 'ok' });
    expect(asked).toEqual(['write file']);
  });
});
