import { readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { ObjectJsonSchema, SessionEvent } from '../protocol/index.js';
import type { ModelScript } from '../daemon/agent/model/scripted.js';
import { createForkProvider, createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { ProviderStartRequest } from '../daemon/provider.js';
import { fakeHost, providerOptions, scriptedModel, startRequest, text, toolResults, useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

async function setup(script: ModelScript, overrides: Parameters<typeof providerOptions>[2] = {}, create = createSpawnProvider) {
  const sessionsDir = await tempDir('sessions-');
  const workspace = await tempDir('ws-');
  const model = scriptedModel(script);
  const provider = create(providerOptions(sessionsDir, model.resolve, overrides));
  const host = fakeHost();
  const start = (request: Partial<ProviderStartRequest> = {}) => provider.start(startRequest(workspace, host, request));
  return { sessionsDir, workspace, model, provider, host, start };
}

describe('persona', () => {
  it('replaces the default persona for this child, interpolating known and configured variables', async () => {
    const { start, model, workspace } = await setup(
      { steps: [{ text: 'a' }, { text: 'b' }] },
      { defaultPersona: 'Default persona for {{team}}.', personaVars: { team: 'core' } },
    );
    await (await start({ persona: 'Reviewer at depth {{depth}} in {{cwd}} via {{provider}} for {{team}}', childDepth: 2 })).result;
    await (await start()).result;
    expect(model.steps[0]?.system).toBe(`Reviewer at depth 2 in ${workspace} via spawn for core`);
    expect(model.steps[1]?.system).toBe('Default persona for core.');
  });

  it('rejects an unknown variable or malformed braces at start, before anything is created', async () => {
    const { start, sessionsDir, model } = await setup({ steps: [{ text: 'never' }] });
    const error = await start({ persona: 'Hello {{mystery}}' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/persona' } });
    expect((error as Error).message).toContain('mystery');
    await expect(start({ persona: 'Hello {{cwd' })).rejects.toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/persona' } });
    expect(await readdir(sessionsDir)).toEqual([]);
    expect(model.names).toEqual([]);
  });

  it('refuses a provider whose configured default persona is not a valid template', async () => {
    const sessionsDir = await tempDir();
    expect(() => createSpawnProvider(providerOptions(sessionsDir, scriptedModel({ steps: [] }).resolve, { defaultPersona: '{{nope}}' }))).toThrow(
      /default persona.*"nope"/,
    );
  });
});

describe('tool filter', () => {
  const script: ModelScript = {
    steps: [{ toolCalls: [{ name: 'list_directory', arguments: {} }, { name: 'read_file', arguments: { path: 'x' } }] }, { text: 'ok' }],
  };

  it('allow: only the listed tools are offered, and the others refuse to run', async () => {
    const { start, model } = await setup(script);
    const run = await start({ toolFilter: { allow: ['read_file'] } });
    await run.result;
    expect(model.steps[0]?.tools).toEqual(['read_file']);
    const [listing, reading] = toolResults(run.localAgent.events);
    expect(listing).toMatchObject({ name: 'list_directory', isError: true, text: expect.stringMatching(/not available/) });
    expect(reading).toMatchObject({ name: 'read_file', text: expect.not.stringMatching(/not available/) });
  });

  it('deny: the listed tools vanish and refuse to run, client tools included', async () => {
    const { start, model, host } = await setup({
      steps: [{ toolCalls: [{ name: 'list_directory', arguments: {} }, { name: 'lookup', arguments: {} }] }, { text: 'ok' }],
    });
    const run = await start({
      toolFilter: { deny: ['list_directory', 'lookup'] },
      tools: [{ name: 'lookup', description: 'client lookup', inputSchema: { type: 'object' } }],
    });
    await run.result;
    expect(model.steps[0]?.tools).toEqual(['read_file', 'search_text']);
    expect(toolResults(run.localAgent.events).map((r) => r.isError)).toEqual([true, true]);
    expect(host.toolCalls).toEqual([]);
  });

  it('rejects an unknown tool name at start', async () => {
    const { start, sessionsDir } = await setup(script);
    const error = await start({ toolFilter: { allow: ['read_file', 'teleport'] } }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/toolFilter' } });
    expect((error as Error).message).toContain('"teleport"');
    expect(await readdir(sessionsDir)).toEqual([]);
  });
});

describe('client-hosted tools', () => {
  it('validates arguments against the declared schema before calling the host', async () => {
    const { start, host } = await setup({
      steps: [
        { toolCalls: [{ name: 'lookup', arguments: { q: 42 } }] },
        { toolCalls: [{ name: 'lookup', arguments: '{"q": "unterminated' }] },
        { toolCalls: [{ name: 'lookup', arguments: { q: 'ok' }, id: 'good' }] },
        { text: 'done' },
      ],
    });
    const run = await start({
      tools: [{ name: 'lookup', description: 'look up', inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }],
    });
    expect((await run.result).stopReason).toBe('completed');
    expect(host.toolCalls).toEqual([{ callId: 'good', name: 'lookup', arguments: { q: 'ok' } }]);
    expect(toolResults(run.localAgent.events)).toEqual([
      { name: 'lookup', isError: true, text: expect.stringMatching(/arguments\/q must be string/) },
      { name: 'lookup', isError: true, text: expect.stringMatching(/not valid JSON/) },
      { name: 'lookup', isError: false, text: 'client tool ok' },
    ]);
  });

  it('turns a failing host call into an error result and keeps going', async () => {
    const sessionsDir = await tempDir();
    const workspace = await tempDir();
    const model = scriptedModel({ steps: [{ toolCalls: [{ name: 'lookup', arguments: {} }] }, { text: 'recovered' }] });
    const host = fakeHost(async () => Promise.reject(new Error('client went away')));
    const provider = createSpawnProvider(providerOptions(sessionsDir, model.resolve));
    const run = await provider.start(startRequest(workspace, host, { tools: [{ name: 'lookup', description: 'l', inputSchema: { type: 'object' } }] }));
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: text('recovered') });
    expect(toolResults(run.localAgent.events)).toEqual([{ name: 'lookup', isError: true, text: 'lookup failed: client went away' }]);
  });

  it('rejects a declaration that clashes with a built-in or has an uncompilable schema', async () => {
    const { start } = await setup({ steps: [] });
    await expect(start({ tools: [{ name: 'read_file', description: 'x', inputSchema: { type: 'object' } }] })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      details: { field: '/tools/0/name' },
    });
    await expect(
      start({
        tools: [
          { name: 'fine', description: 'x', inputSchema: { type: 'object' } },
          { name: 'broken', description: 'x', inputSchema: { type: 'object', properties: { a: { type: 'bogus' } } } },
        ],
      }),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/tools/1/inputSchema' } });
  });
});

describe('structured output', () => {
  const schema: ObjectJsonSchema = {
    type: 'object',
    properties: { answer: { type: 'string' } },
    required: ['answer'],
    additionalProperties: false,
  };

  it('retries an invalid call in the same turn, captures a valid one, refuses later calls and ends the turn', async () => {
    const { start, model } = await setup({
      steps: [
        { toolCalls: [{ name: 'structured_output', arguments: { answer: 42 } }] },
        {
          toolCalls: [
            { name: 'structured_output', arguments: { answer: 'forty-two' } },
            { name: 'list_directory', arguments: {} },
            { name: 'structured_output', arguments: { answer: 'changed my mind' } },
          ],
        },
        { text: 'this step must never run' },
      ],
    });
    const run = await start({ outputSchema: schema });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.structured).toEqual({ answer: 'forty-two' });
    expect(model.steps).toHaveLength(2);
    expect(model.steps[0]?.toolParameters['structured_output']).toEqual(schema);
    expect(model.steps[0]?.system).toMatch(/call(ing)? the `structured_output` tool/);
    const results = toolResults(run.localAgent.events);
    expect(results.map((r) => [r.name, r.isError])).toEqual([
      ['structured_output', true],
      ['structured_output', false],
      ['list_directory', true],
      ['structured_output', true],
    ]);
    expect(results[0]?.text).toMatch(/arguments\/answer must be string/);
    expect(results[2]?.text).toMatch(/already delivered/);
    expect(run.localAgent.events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'completed' });
  });

  it('settles error, without re-prompting, when the child finishes cleanly without a capture', async () => {
    const { start, model } = await setup({ steps: [{ text: 'here is prose instead' }, { text: 'never' }] });
    const result = await (await start({ outputSchema: schema })).result;
    expect(result.stopReason).toBe('error');
    expect(result.structured).toBeUndefined();
    expect(result.diagnostic).toMatch(/without delivering its result through structured_output/);
    expect(result.output).toEqual(text('here is prose instead'));
    expect(model.steps).toHaveLength(1);
  });

  it('exists only for a child that asked for a schema, and cannot be denied by the filter', async () => {
    const { start, model } = await setup({ steps: [{ text: 'a' }] });
    await (await start()).result;
    expect(model.steps[0]?.tools).not.toContain('structured_output');
    await expect(start({ outputSchema: schema, toolFilter: { deny: ['structured_output'] } })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      details: { field: '/toolFilter' },
    });
  });
});

describe('fork', () => {
  const parentEvents: SessionEvent[] = [
    { type: 'user/message', content: text('parent task') },
    { type: 'assistant/message', content: text('parent answer') },
    { type: 'turn/end', reason: 'completed' },
  ];

  it('seeds the child with the parent prefix and reads the result from its own events only', async () => {
    const { start, model, provider } = await setup({ steps: [{ text: '' }] }, {}, createForkProvider);
    expect(provider.name).toBe('fork');
    expect(provider.inheritsParentContext).toBe(true);
    const run = await start({ parent: { sessionId: 'p', cwd: await tempDir(), events: parentEvents } });
    const result = await run.result;
    // The child said nothing of its own: the parent's answer must not leak through as output.
    expect(result).toMatchObject({ stopReason: 'completed', output: [] });
    expect(run.localAgent.seedLength).toBe(3);
    expect(run.localAgent.events.slice(0, 3).map(({ at: _at, ...rest }) => rest)).toEqual(parentEvents);
    expect(model.steps[0]?.events.map((e) => e.type)).toEqual(['user/message', 'assistant/message', 'turn/end', 'user/message']);
  });

  it('returns the child own answer when it gives one', async () => {
    const { start } = await setup({ steps: [{ text: 'child answer' }] }, {}, createForkProvider);
    const run = await start({ parent: { sessionId: 'p', cwd: await tempDir(), events: parentEvents } });
    expect((await run.result).output).toEqual(text('child answer'));
  });

  it('rejects an unbalanced parent prefix naming /parent/events', async () => {
    const { start, sessionsDir } = await setup({ steps: [] }, {}, createForkProvider);
    const cwd = await tempDir();
    const unbalanced: SessionEvent[][] = [
      parentEvents.slice(0, 2),
      parentEvents.slice(1),
      [
        parentEvents[0] as SessionEvent,
        { type: 'assistant/message', content: [], toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{}' }] },
        { type: 'turn/end', reason: 'completed' },
      ],
    ];
    for (const events of unbalanced) {
      await expect(start({ parent: { sessionId: 'p', cwd, events } })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
        details: { field: '/parent/events' },
      });
    }
    expect(await readdir(sessionsDir)).toEqual([]);
  });

  it('spawn ignores parent events entirely', async () => {
    const { start } = await setup({ steps: [{ text: 'fresh' }] });
    const run = await start({ parent: { sessionId: 'p', cwd: await tempDir(), events: parentEvents } });
    await run.result;
    expect(run.localAgent.seedLength).toBe(0);
    expect(run.localAgent.events[0]).toMatchObject({ type: 'user/message', content: text('do the task') });
  });
});
