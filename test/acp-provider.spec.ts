/**
 * The acp provider against real agent processes: what it advertises, what reaches the agent
 * (handshake, env, cwd, prompt), what comes back (output, stop reasons, streamed events,
 * structured output), and resume on the same session.
 */
import { realpathSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type ObjectJsonSchema, type SubagentRun } from '../protocol/index.js';
import type { AcpRun } from '../daemon/providers/acp/index.js';
import {
  RAW_AGENT,
  fakeHost,
  processGone,
  provider,
  readRecord,
  recordedPids,
  request,
  sdkAgentConfig,
  textOf,
  waitFor,
  type RecordEntry,
  workspacePerTest,
} from './fixtures/acp-harness.js';
import { rejection } from './support/assertions.js';

const ws = workspacePerTest();

const recorded = (event: string): RecordEntry[] => readRecord(ws.recordPath).filter((e) => e.event === event);

/** The pid of the one agent process this test started (a resumed chain shares it). */
function theAgentPid(): number {
  const pids = recordedPids(ws.recordPath);
  expect(pids).toHaveLength(1);
  return pids[0]!;
}

describe('descriptor', () => {
  it('advertises exactly what it implements', async () => {
    const acp = provider(sdkAgentConfig(ws, 'reply'));
    expect(acp.name).toBe('acp-test');
    expect(acp.inheritsParentContext).toBe(false);
    expect(acp.capabilities).toEqual({ outputSchema: true, depthLimit: true, toolFilter: false, persona: false });
    expect(acp.runtime).toEqual({ sendMessage: false, resume: true });
    const run = await acp.start(request(ws, fakeHost()));
    expect(run.localAgent).toBeUndefined();
    expect(run.sendMessage).toBeUndefined();
    expect(typeof run.resume).toBe('function');
    expect(run.id).toMatch(/^acp-[0-9a-f-]{36}$/);
    await run.dispose();
  });

  it('rejects invalid configuration when the provider is created', () => {
    expect(() => provider({ name: 'x', command: '' })).toThrow(/command/);
    expect(() => provider({ name: 'x', command: 'node', cwd: '' })).toThrow(/cwd must be a non-empty path/);
    // Relative: resolved against the launch directory, and that directory must exist.
    expect(() => provider({ name: 'x', command: 'node', cwd: 'relative/dir' })).toThrow(`cwd ${process.cwd()}/relative/dir is not an existing directory`);
    expect(() => provider({ name: 'x', command: 'node', initializeTimeoutMs: -1 })).toThrow(/initializeTimeoutMs/);
  });
});

describe('a prompt turn', () => {
  it('handshakes as a minimal client, prompts, and returns the final message', async () => {
    const host = fakeHost();
    const run = await provider(sdkAgentConfig(ws, 'reply')).start(request(ws, host));
    const result = await run.result;
    expect(result).toEqual({ output: [{ type: 'text', text: 'Hello, world' }], stopReason: 'completed' });

    const [init] = recorded('initialize');
    expect(init?.['params']).toMatchObject({
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: false }, terminal: false },
    });
    expect(recorded('session/new').map((e) => e['params'])).toEqual([{ cwd: ws.root, mcpServers: [] }]);
    expect(recorded('prompt')[0]?.['params']).toEqual({
      sessionId: 'fixture-session-1',
      prompt: [{ type: 'text', text: 'hello' }],
    });
    await run.dispose();
  });

  it('streams chunks, reasoning and tool calls to host.emit in order', async () => {
    const host = fakeHost();
    const run = await provider(sdkAgentConfig(ws, 'tools')).start(request(ws, host));
    const result = await run.result;
    // The final message is the one after the last tool call, not the whole turn's text.
    expect(textOf(result.output)).toBe('All done.');
    expect(host.events).toEqual([
      { kind: 'text-delta', text: 'Let me look.' },
      {
        kind: 'session',
        event: {
          type: 'assistant/message',
          content: [],
          toolCalls: [{ id: 'call-1', name: 'Read notes', arguments: '{"path":"notes.txt"}' }],
        },
      },
      {
        kind: 'session',
        event: { type: 'tool/result', callId: 'call-1', name: 'Read notes', content: [{ type: 'text', text: 'notes content' }], isError: false },
      },
      { kind: 'session', event: { type: 'assistant/message', content: [], toolCalls: [{ id: 'call-2', name: 'Delete all', arguments: '{}' }] } },
      { kind: 'session', event: { type: 'tool/result', callId: 'call-2', name: 'Delete all', content: [], isError: true } },
      { kind: 'text-delta', text: 'All ' },
      { kind: 'text-delta', text: 'done.' },
    ]);
    await run.dispose();
  });

  it('emits reasoning as reasoning-delta before the text', async () => {
    const host = fakeHost();
    const run = await provider(sdkAgentConfig(ws, 'reply')).start(request(ws, host));
    await run.result;
    expect(host.events.map((e) => e.kind)).toEqual(['reasoning-delta', 'text-delta', 'text-delta', 'text-delta']);
    expect(host.events[0]).toEqual({ kind: 'reasoning-delta', text: 'pondering' });
    await run.dispose();
  });

  it.each([
    ['stop:refusal', 'refusal'],
    ['stop:max_tokens', 'max-tokens'],
    ['stop:max_turn_requests', 'error'],
    ['stop:no_such_reason', 'error'],
    ['stop:cancelled', 'aborted'],
    ['stop:end_turn', 'completed'],
  ])('maps the agent stop reason (%s → %s)', async (mode, expected) => {
    const run = await provider(sdkAgentConfig(ws, mode)).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe(expected);
    expect(textOf(result.output)).toBe('partial');
    await run.dispose();
  });

  it('passes image content to an agent that accepts images', async () => {
    const run = await provider(sdkAgentConfig(ws, 'echo', { env: { ACP_FIXTURE_IMAGES: '1' } })).start(
      request(ws, fakeHost(), {
        prompt: [
          { type: 'text', text: 'look' },
          { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
        ],
      }),
    );
    expect(textOf((await run.result).output)).toBe('turn 1: look|[image image/png 8]');
    expect(recorded('prompt')[0]?.['params']).toMatchObject({
      prompt: [
        { type: 'text', text: 'look' },
        { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
      ],
    });
    await run.dispose();
  });

  it('refuses image content for an agent that does not accept images, leaving no process', async () => {
    const error = await rejection(
      provider(sdkAgentConfig(ws, 'echo')).start(
        request(ws, fakeHost(), { prompt: [{ type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' }] }),
      ),
    );
    expect(error.code).toBe('INVALID_REQUEST');
    expect(recorded('session/new')).toEqual([]);
    expect(recordedPids(ws.recordPath).every(processGone)).toBe(true);
  });

  it('rejects client-hosted tools before spawning anything', async () => {
    const error = await rejection(
      provider(sdkAgentConfig(ws, 'reply')).start(
        request(ws, fakeHost(), { tools: [{ name: 'lookup', description: 'd', inputSchema: { type: 'object' } }] }),
      ),
    );
    expect(error.code).toBe('UNSUPPORTED_CAPABILITY');
    expect(recordedPids(ws.recordPath)).toEqual([]);
  });

  it('runs concurrent starts as separate processes', async () => {
    const acp = provider(sdkAgentConfig(ws, 'reply'));
    const runs = await Promise.all([acp.start(request(ws, fakeHost())), acp.start(request(ws, fakeHost()))]);
    const results = await Promise.all(runs.map((r) => r.result));
    expect(results.map((r) => textOf(r.output))).toEqual(['Hello, world', 'Hello, world']);
    const pids = recordedPids(ws.recordPath);
    expect(new Set(pids).size).toBe(2);
    await Promise.all(runs.map((r) => r.dispose()));
    expect(pids.every(processGone)).toBe(true);
  });
});

describe('the agent process environment', () => {
  it('scrubs the daemon env, adds config and request env, and runs in the parent cwd', async () => {
    process.env['ACP_TEST_SECRET_TOKEN'] = 'hunter2';
    try {
      const acp = provider(sdkAgentConfig(ws, 'reply', { env: { FROM_CONFIG: 'c', SHARED: 'config' } }));
      const run = await acp.start(request(ws, fakeHost(), { env: { FROM_REQUEST: 'r', SHARED: 'request' } }));
      await run.result;
      await run.dispose();
    } finally {
      delete process.env['ACP_TEST_SECRET_TOKEN'];
    }
    const [start] = recorded('start');
    const env = start?.['env'] as Record<string, string>;
    expect(env['ACP_TEST_SECRET_TOKEN']).toBeUndefined();
    expect(env).toMatchObject({ PATH: process.env['PATH'], FROM_CONFIG: 'c', FROM_REQUEST: 'r', SHARED: 'request' });
    const allowed = new Set(['PATH', 'HOME', 'LANG', 'FROM_CONFIG', 'FROM_REQUEST', 'SHARED', 'ACP_FIXTURE_MODE', 'ACP_FIXTURE_RECORD']);
    expect(Object.keys(env).filter((k) => !allowed.has(k))).toEqual([]);
    expect(start?.['cwd']).toBe(realpathSync(ws.root));
  });

  it('uses the configured cwd for the process and for the session, and finds bare commands on PATH', async () => {
    const run = await provider(sdkAgentConfig(ws, 'reply', { command: 'node', cwd: ws.outside })).start(request(ws, fakeHost()));
    await run.result;
    await run.dispose();
    expect(recorded('start')[0]?.['cwd']).toBe(realpathSync(ws.outside));
    expect(recorded('session/new')[0]?.['params']).toEqual({ cwd: ws.outside, mcpServers: [] });
  });
});

describe('a hand-written agent without the SDK', () => {
  const rawConfig = (extra: Record<string, string> = {}) => ({
    name: 'acp-raw',
    command: process.execPath,
    args: [RAW_AGENT],
    permission: 'allow' as const,
    disposeGraceMs: { stdin: 2_000, term: 1_000 },
    env: { ACP_FIXTURE_RECORD: ws.recordPath, ...extra },
  });

  it('completes a turn with updates and a permission round trip', async () => {
    const host = fakeHost();
    const run = await provider(rawConfig()).start(request(ws, host, { prompt: [{ type: 'text', text: 'ping' }] }));
    const result = await run.result;
    expect(result).toEqual({ output: [{ type: 'text', text: 'permission ok' }], stopReason: 'completed' });
    expect(host.events.filter((e) => e.kind === 'text-delta')).toEqual([
      { kind: 'text-delta', text: 'raw agent heard: ' },
      { kind: 'text-delta', text: 'ping' },
      { kind: 'text-delta', text: 'permission ok' },
    ]);
    expect(recorded('permission')).toEqual([{ event: 'permission', choice: 'ok' }]);
    await run.dispose();
    expect(recordedPids(ws.recordPath).every(processGone)).toBe(true);
  });

  it('treats a stop reason outside ACP as an error', async () => {
    const run = await provider(rawConfig({ RAW_STOP_REASON: 'exploded' })).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toBe('agent ended the turn with unknown stop reason "exploded"');
    expect(textOf(result.output)).toBe('permission ok');
    await run.dispose();
  });
});

describe('structured output', () => {
  const schema: ObjectJsonSchema = {
    type: 'object',
    properties: { answer: { type: 'number' }, why: { type: 'string' } },
    required: ['answer'],
    additionalProperties: false,
  };

  async function structuredRun(reply: string): Promise<Awaited<SubagentRun['result']>> {
    const run = await provider(sdkAgentConfig(ws, 'say', { env: { ACP_FIXTURE_REPLY: reply } })).start(
      request(ws, fakeHost(), { outputSchema: schema }),
    );
    const result = await run.result;
    await run.dispose();
    return result;
  }

  it('asks for one JSON object and returns the validated value', async () => {
    const result = await structuredRun('{"answer": 42, "why": "it is"}');
    expect(result).toMatchObject({ stopReason: 'completed', structured: { answer: 42, why: 'it is' } });
    const prompt = recorded('prompt')[0]?.['params'] as { prompt: { type: string; text: string }[] };
    expect(prompt.prompt).toHaveLength(2);
    expect(prompt.prompt[1]?.text).toContain('exactly one JSON object');
    expect(prompt.prompt[1]?.text).toContain('"answer"');
  });

  it('accepts the object inside a whole-message code fence', async () => {
    const result = await structuredRun('```json\n{"answer": 7}\n```');
    expect(result).toMatchObject({ stopReason: 'completed', structured: { answer: 7 } });
  });

  it('fails a final message that is not JSON', async () => {
    const result = await structuredRun('The answer is 42.');
    expect(result.stopReason).toBe('error');
    expect(result.structured).toBeUndefined();
    expect(result.diagnostic).toMatch(/not valid JSON/);
    expect(textOf(result.output)).toBe('The answer is 42.');
  });

  it('fails JSON that does not match the schema', async () => {
    const result = await structuredRun('{"answer": "forty-two", "extra": 1}');
    expect(result.stopReason).toBe('error');
    expect(result.structured).toBeUndefined();
    expect(result.diagnostic).toContain('does not match the output schema');
    expect(result.diagnostic).toContain('/answer must be number');
  });

  it('rejects a schema ajv cannot compile before spawning', async () => {
    const error = await rejection(
      provider(sdkAgentConfig(ws, 'say')).start(
        request(ws, fakeHost(), { outputSchema: { type: 'object', properties: { a: { type: 'no-such-type' } } } }),
      ),
    );
    expect(error.code).toBe('UNSUPPORTED_SCHEMA');
    expect(recordedPids(ws.recordPath)).toEqual([]);
  });
});

describe('resume', () => {
  it('prompts the same session in the same process; the last run of the chain owns the process', async () => {
    const run1 = (await provider(sdkAgentConfig(ws, 'echo')).start(request(ws, fakeHost()))) as AcpRun;
    expect(textOf((await run1.result).output)).toBe('turn 1: hello');
    const run2 = await run1.resume([{ type: 'text', text: 'again' }]);
    expect(run2.id).not.toBe(run1.id);
    const agentPid = theAgentPid();
    expect(textOf((await run2.result).output)).toBe('turn 2: again');
    expect(recorded('session/new')).toHaveLength(1);
    expect(recorded('prompt').map((e) => (e['params'] as { sessionId: string }).sessionId)).toEqual([
      'fixture-session-1',
      'fixture-session-1',
    ]);

    await run1.dispose();
    expect(processGone(agentPid)).toBe(false);
    expect((await rejection(run1.resume([{ type: 'text', text: 'no' }]))).code).toBe('RUN_STATE');
    await run2.dispose();
    expect(processGone(agentPid)).toBe(true);
    expect((await rejection(run2.resume([{ type: 'text', text: 'no' }]))).code).toBe('RUN_STATE');
  });

  it('refuses to resume a run that has not settled', async () => {
    const run = await provider(sdkAgentConfig(ws, 'slow')).start(request(ws, fakeHost()));
    expect((await rejection(run.resume!([{ type: 'text', text: 'too soon' }]))).code).toBe('RUN_STATE');
    await run.dispose();
  });

  it('resumes after a cancelled turn once the agent has answered it, with its own signal', async () => {
    const first = new AbortController();
    const host = fakeHost();
    const run1 = (await provider(sdkAgentConfig(ws, 'slow')).start(request(ws, host, { signal: first.signal }))) as AcpRun;
    await waitFor(() => host.events.length > 0, 5_000, 'first chunk');
    first.abort();
    expect((await run1.result).stopReason).toBe('aborted');

    const second = new AbortController();
    const run2 = await run1.resume([{ type: 'text', text: 'again' }], { signal: second.signal });
    await waitFor(() => recorded('prompt').length === 2, 5_000, 'second prompt at the agent');
    expect(recorded('stop')[0]).toMatchObject({ stopReason: 'cancelled', turn: 1 });
    second.abort();
    expect((await run2.result).stopReason).toBe('aborted');
    await run1.dispose();
    await run2.dispose();
    expect(processGone(theAgentPid())).toBe(true);
  });

  it('fails a resume that is waiting for the agent as soon as the run is disposed', async () => {
    const controller = new AbortController();
    const host = fakeHost();
    const run1 = (await provider(sdkAgentConfig(ws, 'deaf')).start(request(ws, host, { signal: controller.signal }))) as AcpRun;
    await waitFor(() => host.events.length > 0, 5_000, 'first chunk');
    controller.abort();
    await run1.result;
    // The deaf agent never answers the cancelled turn, so this resume waits (up to 5 s)…
    const resuming = rejection(run1.resume([{ type: 'text', text: 'again' }], { signal: new AbortController().signal }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const t0 = performance.now();
    await run1.dispose();
    // …until the dispose ends it.
    expect((await resuming).code).toBe('RUN_STATE');
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(processGone(theAgentPid())).toBe(true);
  });

  it('gives up resuming when the agent never answers the cancelled turn', async () => {
    const controller = new AbortController();
    const host = fakeHost();
    // The same bound covers the handshake, so it must leave node time to start the fixture.
    const run1 = (await provider(sdkAgentConfig(ws, 'deaf', { initializeTimeoutMs: 1_500 })).start(
      request(ws, host, { signal: controller.signal }),
    )) as AcpRun;
    await waitFor(() => host.events.length > 0, 5_000, 'first chunk');
    controller.abort();
    await run1.result;
    // The start signal is spent: resuming on it is refused, a fresh one is needed.
    expect((await rejection(run1.resume([{ type: 'text', text: 'again' }]))).code).toBe('ABORTED');
    const t0 = performance.now();
    const retry = await rejection(run1.resume([{ type: 'text', text: 'again' }], { signal: new AbortController().signal }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1_400);
    expect(retry.code).toBe('RUN_STATE');
    expect(retry.message).toContain('has not answered the previous prompt within 1500 ms');
    expect(recorded('prompt')).toHaveLength(1);
    await run1.dispose();
    expect(processGone(theAgentPid())).toBe(true);
  });
});
