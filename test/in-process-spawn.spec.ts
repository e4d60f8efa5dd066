import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SubagentError, type SessionEvent } from '../protocol/index.js';
import { ModelError } from '../daemon/agent/model/model-adapter.js';
import type { ModelScript } from '../daemon/agent/model/scripted.js';
import { readSessionFile } from '../daemon/store/session-reader.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import {
  fakeHost,
  providerOptions,
  scriptedModel,
  silentLog,
  startRequest,
  text,
  toolResults,
  useTempDirs,
  waitFor,
} from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

async function spawnWith(script: ModelScript, overrides: Parameters<typeof providerOptions>[2] = {}) {
  const sessionsDir = join(await tempDir('sessions-'), 'sessions');
  const workspace = await tempDir('ws-');
  const model = scriptedModel(script);
  const provider = createSpawnProvider(providerOptions(sessionsDir, model.resolve, overrides));
  const host = fakeHost();
  return { sessionsDir, workspace, model, provider, host };
}

const types = (events: readonly SessionEvent[]) => events.map((e) => e.type);

describe('spawn: the loop', () => {
  it('runs model step → tool calls → results → next step until the model stops, and logs it all', async () => {
    const usage = { promptTokens: 10, completionTokens: 2 };
    const { provider, host, workspace, sessionsDir, model } = await spawnWith({
      steps: [
        { text: 'looking', toolCalls: [{ name: 'list_directory', arguments: {} }], usage },
        { text: 'all done', usage },
      ],
    });
    const run = await provider.start(startRequest(workspace, host, { childDepth: 2 }));
    const result = await run.result;
    expect(result).toEqual({
      output: [{ type: 'text', text: 'all done' }],
      stopReason: 'completed',
      usage: { promptTokens: 20, completionTokens: 4, cacheHitTokens: 0, cacheMissTokens: 0, reasoningTokens: 0 },
    });
    expect(model.steps).toHaveLength(2);
    const events = run.localAgent.events;
    expect(types(events)).toEqual(['user/message', 'assistant/message', 'usage', 'tool/result', 'assistant/message', 'usage', 'turn/end']);

    // The file on disk: the header, then exactly the in-memory events, each stamped.
    const lines = (await readFile(join(sessionsDir, `${run.id}.jsonl`), 'utf8')).trimEnd().split('\n');
    const header = JSON.parse(lines[0] as string);
    expect(header).toEqual({
      id: run.id,
      parentSession: 'parent-session',
      cwd: workspace,
      delegationDepth: 2,
      provider: 'spawn',
      model: 'scripted-test',
      createdAt: expect.any(String),
    });
    expect(lines.slice(1).map((l) => JSON.parse(l))).toEqual(events);
    expect(events.every((e) => typeof e.at === 'string')).toBe(true);

    // Progress: text deltas and every appended event, in order.
    expect(host.sessionEvents()).toEqual(events);
    const deltas = host.emitted.filter((e) => e.kind === 'text-delta').map((e) => (e.kind === 'text-delta' ? e.text : ''));
    expect(deltas.join('')).toBe('lookingall done');
    await run.dispose();
  });

  it.each([
    ['length', 'max-tokens', 'max-tokens'],
    ['content_filter', 'blocked', 'refusal'],
    ['stop', 'completed', 'completed'],
  ] as const)('maps finish %s to turn end %s and stop reason %s', async (finish, turnEnd, stopReason) => {
    const { provider, host, workspace } = await spawnWith({ steps: [{ text: 'partial answer', finish }] });
    const run = await provider.start(startRequest(workspace, host));
    const result = await run.result;
    expect(result.stopReason).toBe(stopReason);
    expect(result.output).toEqual(text('partial answer'));
    expect(run.localAgent.events.at(-1)).toMatchObject({ type: 'turn/end', reason: turnEnd });
  });

  it('answers the tool calls of a cut-off step without running them', async () => {
    const { provider, host, workspace } = await spawnWith({
      steps: [{ toolCalls: [{ name: 'lookup', arguments: {} }], finish: 'length' }],
    });
    const run = await provider.start(
      startRequest(workspace, host, { tools: [{ name: 'lookup', description: 'l', inputSchema: { type: 'object' } }] }),
    );
    expect((await run.result).stopReason).toBe('max-tokens');
    expect(host.toolCalls).toEqual([]);
    expect(toolResults(run.localAgent.events)).toEqual([{ name: 'lookup', isError: true, text: expect.stringMatching(/Not run/) }]);
  });

  it('maps a model error to error with its message as a bounded diagnostic, keeping streamed text', async () => {
    const { provider, host, workspace } = await spawnWith({
      steps: [{ text: 'half an answer', error: { kind: 'http', message: `upstream exploded ${'x'.repeat(6000)}` } }],
    });
    const run = await provider.start(startRequest(workspace, host));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/^upstream exploded x+ …\[truncated\]$/);
    expect(Buffer.byteLength(result.diagnostic ?? '')).toBeLessThanOrEqual(4096);
    expect(result.output).toEqual(text('half an answer'));
    expect(run.localAgent.events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'error' });
  });

  it('ends the turn with max-steps at the configured step limit (an error result)', async () => {
    const loop = { toolCalls: [{ name: 'list_directory', arguments: {} }] };
    const { provider, host, workspace, model } = await spawnWith({ steps: [loop, loop, loop, loop] }, { maxSteps: 2 });
    const run = await provider.start(startRequest(workspace, host));
    const result = await run.result;
    expect(model.steps).toHaveLength(2);
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/after 2 model steps/);
    expect(run.localAgent.events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'max-steps' });
  });

  it('resolves (never rejects) when the script runs out', async () => {
    const { provider, host, workspace } = await spawnWith({ steps: [{ toolCalls: [{ name: 'list_directory', arguments: {} }] }] });
    const run = await provider.start(startRequest(workspace, host));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/model script has 1 step/);
  });
});

describe('spawn: steering', () => {
  it('folds a message sent while the model runs in before the next step', async () => {
    const { provider, host, workspace, model } = await spawnWith({
      steps: [{ delayMs: 150, toolCalls: [{ name: 'list_directory', arguments: {} }] }, { text: 'steered' }],
    });
    const run = await provider.start(startRequest(workspace, host));
    await waitFor(() => model.steps.length === 1);
    run.sendMessage(text('also check src/'));
    expect((await run.result).output).toEqual(text('steered'));
    expect(types(run.localAgent.events)).toEqual(['user/message', 'assistant/message', 'tool/result', 'steering/message', 'assistant/message', 'turn/end']);
    // The first step ran without it; the second step's model saw it.
    expect(types(model.steps[0]?.events ?? [])).not.toContain('steering/message');
    expect(model.steps[1]?.events.at(-1)).toMatchObject({ type: 'steering/message', content: text('also check src/') });
  });

  it('accepts steering right after start, before the first step, and emits nothing before start returns', async () => {
    const { provider, host, workspace, model } = await spawnWith({ steps: [{ text: 'ok' }] });
    const run = await provider.start(startRequest(workspace, host));
    expect(host.emitted).toEqual([]);
    expect(model.steps).toHaveLength(0);
    run.sendMessage(text('early note'));
    await run.result;
    expect(types(model.steps[0]?.events ?? [])).toEqual(['user/message', 'steering/message']);
  });

  it('asks the model at once when its caller is across a wire (steersInTurn false), before start returns', async () => {
    const { provider, host, workspace, model } = await spawnWith({ steps: [{ text: 'ok' }] });
    const remote = { ...host, steersInTurn: false };
    const run = await provider.start(startRequest(workspace, remote));
    // In-process (the test above) the first step waits a macrotask; here it was asked already.
    expect(model.steps).toHaveLength(1);
    expect(types(model.steps[0]?.events ?? [])).toEqual(['user/message']);
    expect((await run.result).output).toEqual(text('ok'));
  });

  it('takes another step rather than finishing with steering still queued', async () => {
    const { provider, host, workspace, model } = await spawnWith({ steps: [{ delayMs: 150, text: 'first answer' }, { text: 'second answer' }] });
    const run = await provider.start(startRequest(workspace, host));
    await waitFor(() => model.steps.length === 1);
    run.sendMessage(text('one more thing'));
    const result = await run.result;
    expect(model.steps).toHaveLength(2);
    expect(result.output).toEqual(text('second answer'));
    expect(types(run.localAgent.events)).toEqual(['user/message', 'assistant/message', 'steering/message', 'assistant/message', 'turn/end']);
  });

  it('refuses steering once the run has settled', async () => {
    const { provider, host, workspace } = await spawnWith({ steps: [{ text: 'done' }] });
    const run = await provider.start(startRequest(workspace, host));
    await run.result;
    expect(() => run.sendMessage(text('too late'))).toThrow(SubagentError);
    expect(() => run.sendMessage(text('too late'))).toThrow(expect.objectContaining({ code: 'RUN_STATE' }));
  });
});

describe('spawn: resume', () => {
  it('continues the same session with a new user message, keeping the depth, and reports only its own output', async () => {
    const { provider, host, workspace, sessionsDir, model } = await spawnWith({
      steps: [{ text: 'first result' }, { delayMs: 100, text: '' }, { text: 'after resume' }],
    });
    const run = await provider.start(startRequest(workspace, host, { childDepth: 3 }));
    expect((await run.result).output).toEqual(text('first result'));

    const next = await run.resume(text('follow-up'));
    expect(next.id).toBe(run.id);
    expect(next.localAgent).toBe(run.localAgent);
    await expect(next.resume(text('not yet'))).rejects.toMatchObject({ code: 'RUN_STATE' });
    const resumed = await next.result;
    // The follow-up step said nothing and finished: its result must not reuse the first run's message.
    expect(resumed).toMatchObject({ stopReason: 'completed', output: [] });
    expect(model.steps[1]?.events.map((e) => e.type)).toEqual(['user/message', 'assistant/message', 'turn/end', 'user/message']);

    const third = await next.resume(text('again'));
    expect((await third.result).output).toEqual(text('after resume'));

    const loaded = await readSessionFile(join(sessionsDir, `${run.id}.jsonl`));
    expect(loaded.header.delegationDepth).toBe(3);
    expect(loaded.events.filter((e) => e.type === 'user/message').map((e) => (e.type === 'user/message' ? e.content : []))).toEqual([
      text('do the task'),
      text('follow-up'),
      text('again'),
    ]);
    expect(loaded.events).toEqual(run.localAgent.events);
    await Promise.all([run.dispose(), next.dispose(), third.dispose()]);
  });
});

describe('spawn: cancellation', () => {
  it('rejects with ABORTED and creates nothing when the signal is already aborted', async () => {
    const { provider, host, workspace, sessionsDir } = await spawnWith({ steps: [{ text: 'never' }] });
    const controller = new AbortController();
    controller.abort();
    await expect(provider.start(startRequest(workspace, host, { signal: controller.signal }))).rejects.toMatchObject({ code: 'ABORTED' });
    await expect(readdir(sessionsDir)).rejects.toThrow(/ENOENT/);
  });

  it('rolls back a child whose start is cancelled while its session is being created', async () => {
    const { host, workspace, sessionsDir, model } = await spawnWith({ steps: [{ text: 'never' }] });
    const controller = new AbortController();
    // The provider derives the child's logger right before creating the session: abort then.
    const log = Object.assign(Object.create(silentLog) as typeof silentLog, {
      child: () => {
        setImmediate(() => controller.abort());
        return silentLog;
      },
    });
    const provider = createSpawnProvider(providerOptions(sessionsDir, model.resolve, { log }));
    await expect(provider.start(startRequest(workspace, host, { signal: controller.signal }))).rejects.toMatchObject({ code: 'ABORTED' });
    expect(await readdir(sessionsDir)).toEqual([]);
    expect(model.steps).toHaveLength(0);
  });

  it('cancels a ready child through the same signal: the result settles aborted', async () => {
    const { provider, host, workspace, model } = await spawnWith({ steps: [{ delayMs: 10_000, text: 'too slow' }] });
    const controller = new AbortController();
    const run = await provider.start(startRequest(workspace, host, { signal: controller.signal }));
    await waitFor(() => model.steps.length === 1);
    controller.abort();
    const result = await run.result;
    expect(result.stopReason).toBe('aborted');
    expect(run.localAgent.events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'aborted' });
    expect(() => run.sendMessage(text('hello?'))).toThrow(expect.objectContaining({ code: 'RUN_STATE' }));
  });

  it('reports aborted, not error, when a cancelled run fails in a tool that ignores its signal', async () => {
    const sessionsDir = await tempDir('sessions-');
    const workspace = await tempDir('ws-');
    const model = scriptedModel({ steps: [{ toolCalls: [{ name: 'hang', arguments: {} }] }] });
    const provider = createSpawnProvider(providerOptions(sessionsDir, model.resolve));
    const host = fakeHost(() => new Promise(() => undefined));
    const controller = new AbortController();
    const run = await provider.start(
      startRequest(workspace, host, { signal: controller.signal, tools: [{ name: 'hang', description: 'h', inputSchema: { type: 'object' } }] }),
    );
    await waitFor(() => host.toolCalls.length === 1);
    controller.abort();
    expect((await run.result).stopReason).toBe('aborted');
    expect(toolResults(run.localAgent.events)).toEqual([{ name: 'hang', isError: true, text: 'Cancelled while running.' }]);
  });

  it('dispose cancels, waits for the run to settle, and is idempotent; provider dispose refuses new starts', async () => {
    const { provider, host, workspace, model } = await spawnWith({ steps: [{ delayMs: 10_000, text: 'too slow' }] });
    const run = await provider.start(startRequest(workspace, host));
    await waitFor(() => model.steps.length === 1);
    let settled = false;
    void run.result.then(() => (settled = true));
    await Promise.all([run.dispose(), run.dispose()]);
    await run.dispose();
    await Promise.resolve();
    expect(settled).toBe(true);
    expect((await run.result).stopReason).toBe('aborted');

    const other = await provider.start(startRequest(workspace, host));
    await provider.dispose();
    expect((await other.result).stopReason).toBe('aborted');
    await expect(provider.start(startRequest(workspace, host))).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });
});

describe('spawn: start failures', () => {
  it('maps a model configuration error to START_FAILED and passes the requested model name', async () => {
    const sessionsDir = await tempDir('sessions-');
    const workspace = await tempDir('ws-');
    const names: Array<string | undefined> = [];
    const provider = createSpawnProvider(
      providerOptions(sessionsDir, (name) => {
        names.push(name);
        throw new ModelError('config', `no model named ${name}`);
      }),
    );
    const error = await provider.start(startRequest(workspace, fakeHost(), { agentOptions: { model: 'gpt-none' } })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({ code: 'START_FAILED', message: 'no model named gpt-none' });
    expect(names).toEqual(['gpt-none']);
    expect(await readdir(sessionsDir)).toEqual([]);
  });

  it('advertises all four capabilities and both runtime operations', async () => {
    const { provider } = await spawnWith({ steps: [] });
    expect(provider.name).toBe('spawn');
    expect(provider.inheritsParentContext).toBe(false);
    expect(provider.capabilities).toEqual({ outputSchema: true, depthLimit: true, toolFilter: true, persona: true });
    expect(provider.runtime).toEqual({ sendMessage: true, resume: true });
  });
});
