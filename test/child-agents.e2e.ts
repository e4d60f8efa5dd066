/**
 * Real children through the real client and a real daemon process. The in-process providers
 * (`spawn`, `fork`) talk to a local chat-completions server through the `openai-compatible`
 * adapter, configured the way an operator would (config `model` + an API key in the daemon's
 * env); the `scripted` model is used where an HTTP server adds nothing. Every assertion looks at
 * the world: the request bodies the server recorded, the daemon's session log (`ops.inspect`),
 * what the client's tool handler saw.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ClientStartRequest,
  type ClientTool,
  type ContentBlock,
  type HarnessAgentLike,
  type RemoteSubagentRun,
  type RemoteSubagentService,
  type RunEvent,
  type SessionEvent,
  type SubagentEndEvent,
} from '../client/index.js';
import { chunk, errorResponse, textResponse, toolCallResponse, usageOnlyChunk, type StreamStep } from './support/chat-completions-server.js';
import { waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, perTestModelServer, RunPool, since, startE2eDaemon } from './support/e2e-daemon.js';
import { contentText, ModelServer, type WireMessage } from './support/e2e-model-server.js';
import { rejection } from './support/assertions.js';

const API_KEY = 'sk-e2e-child-agents';
const IDLE_TIMEOUT_MS = 1000;
const NOTES = 'The secret fruit is PINEAPPLE-42.\n';

let server: ModelServer;
let daemon: DaemonProcess;
let workspace: string;
let scriptsDir: string;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  server = await ModelServer.start();
  daemon = await startE2eDaemon(
    {
      model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', idleTimeoutMs: IDLE_TIMEOUT_MS, maxRetries: 1 },
      detachGraceMs: 0,
    },
    { TEST_KEY: API_KEY },
  );
  workspace = mkdtempSync(join(tmpdir(), 'subagentd-e2e-ws-'));
  writeFileSync(join(workspace, 'notes.txt'), NOTES);
  mkdirSync(join(workspace, 'sub'));
  scriptsDir = mkdtempSync(join(tmpdir(), 'subagentd-e2e-scripts-'));
});

afterAll(async () => {
  await daemon?.stop();
  await server?.close();
  if (workspace) rmSync(workspace, { recursive: true, force: true });
  if (scriptsDir) rmSync(scriptsDir, { recursive: true, force: true });
});

perTestModelServer(() => server, runs, clients);

// ---------------------------------------------------------------------------------------------
// Helpers

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
const never = (): AbortSignal => new AbortController().signal;
const plainParent = (extra: Record<string, unknown> = {}) => ({ sessionId: 'parent-e2e', cwd: workspace, ...extra });

let scriptCount = 0;
/** Writes a scripted-model script and returns the model name that selects it. */
function scripted(steps: unknown[]): string {
  const path = join(scriptsDir, `script-${++scriptCount}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

async function client(): Promise<RemoteSubagentService> {
  return clients.connect(daemon.socket);
}

async function start(
  service: RemoteSubagentService,
  request: Partial<ClientStartRequest> = {},
  provider = 'spawn',
): Promise<RemoteSubagentRun> {
  const run = await service.start(provider, {
    prompt: text('do the task'),
    parent: plainParent(),
    signal: never(),
    ...request,
  });
  return runs.track(run as RemoteSubagentRun);
}

/** The rejection of `promise`, which must be a SubagentError. */
const role = (): StreamStep => ({ data: chunk({ role: 'assistant', content: '' }) });
const say = (content: string): StreamStep => ({ data: chunk({ content }) });
const finish = (reason: string): StreamStep => ({ data: chunk({}, { finish_reason: reason }) });

const toolMessage = (messages: WireMessage[], callId: string): WireMessage | undefined =>
  messages.find((m) => m.role === 'tool' && m.tool_call_id === callId);

function toolResults(events: readonly SessionEvent[]): Array<{ name: string; isError: boolean; text: string }> {
  return events.flatMap((e) =>
    e.type === 'tool/result' ? [{ name: e.name, isError: e.isError, text: e.content.map((b) => (b.type === 'text' ? b.text : '')).join('') }] : [],
  );
}

// ---------------------------------------------------------------------------------------------

describe('spawn over the openai-compatible adapter', () => {
  it('streams text deltas, runs a split multi-call tool step, sends the results back, sums usage', async () => {
    const service = await client();
    const ends: SubagentEndEvent[] = [];
    const starts: string[] = [];
    service.on('subagent/start', (e) => void starts.push(e.runId));
    service.on('subagent/end', (e) => void ends.push(e));
    server.enqueue(
      {
        type: 'stream',
        steps: [
          role(),
          say('Let me look.'),
          // Two calls, their ids, names and arguments split over interleaved chunks.
          { data: chunk({ tool_calls: [{ index: 0, id: 'call_read', type: 'function', function: { name: 'read_file', arguments: '' } }] }) },
          { data: chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path":' } }] }) },
          { data: chunk({ tool_calls: [{ index: 1, id: 'call_list', type: 'function', function: { name: 'list_directory', arguments: '{"pa' } }] }) },
          { data: chunk({ tool_calls: [{ index: 0, function: { arguments: '"notes.txt"}' } }] }) },
          { data: chunk({ tool_calls: [{ index: 1, function: { arguments: 'th":"."}' } }] }) },
          finish('tool_calls'),
          { data: usageOnlyChunk({ prompt_tokens: 11, completion_tokens: 7 }) },
          { done: true },
        ],
      },
      {
        type: 'stream',
        steps: [
          role(),
          say('The notes '),
          say('say '),
          say('PINEAPPLE-42.'),
          finish('stop'),
          { data: usageOnlyChunk({ prompt_tokens: 40, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 8 } }) },
          { done: true },
        ],
      },
    );
    const events: RunEvent[] = [];
    const run = await start(service, { prompt: text('What do the notes say?'), onEvent: (e) => void events.push(e) });
    const result = await run.result;

    const expectedUsage = { promptTokens: 51, completionTokens: 12, cacheHitTokens: 8, cacheMissTokens: 43, reasoningTokens: 0 };
    expect(result).toMatchObject({ stopReason: 'completed', output: text('The notes say PINEAPPLE-42.'), usage: expectedUsage });
    expect(result.diagnostic).toBeUndefined();
    const deltas = events.flatMap((e) => (e.kind === 'text-delta' ? [e.text] : []));
    expect(deltas).toEqual(['Let me look.', 'The notes ', 'say ', 'PINEAPPLE-42.']);

    // What the server saw: two requests, the configured model and key, the workspace tools.
    expect(server.requests).toHaveLength(2);
    const [first, second] = server.requests;
    expect(first!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(first!.body).toMatchObject({ model: 'test-model', stream: true });
    const offered = (first!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name);
    expect(offered).toEqual(expect.arrayContaining(['read_file', 'list_directory', 'search_text']));
    expect(contentText(server.messages(0).find((m) => m.role === 'user'))).toBe('What do the notes say?');

    // The second request carries the reassembled calls and the real tool results.
    const messages = server.messages(1);
    const assistant = messages.find((m) => m.role === 'assistant');
    expect(contentText(assistant)).toBe('Let me look.');
    expect(assistant?.tool_calls?.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ['call_read', 'read_file', { path: 'notes.txt' }],
      ['call_list', 'list_directory', { path: '.' }],
    ]);
    expect(contentText(toolMessage(messages, 'call_read'))).toBe(NOTES);
    expect(contentText(toolMessage(messages, 'call_list')).split('\n')).toEqual(['notes.txt', 'sub/']);
    expect(second!.body.model).toBe('test-model');

    // The lifecycle pair, with the same usage and output.
    await waitFor(() => ends.length === 1, 2000);
    expect(starts).toEqual([run.id]);
    expect(ends[0]).toMatchObject({
      runId: run.id,
      provider: 'spawn',
      local: true,
      stopReason: 'completed',
      lastAssistantMessage: text('The notes say PINEAPPLE-42.'),
      usage: expectedUsage,
    });
  });

  it.each([
    ['length', 'max-tokens'],
    ['content_filter', 'refusal'],
  ])('finish_reason %s ends the run with %s', async (finishReason, stopReason) => {
    const service = await client();
    server.enqueue(textResponse(['cut ', 'short'], { finish: finishReason }));
    const run = await start(service);
    const result = await run.result;
    expect(result.stopReason).toBe(stopReason);
    expect(result.output).toEqual(text('cut short'));
    expect(server.requests).toHaveLength(1);
  });

  it('a 429 with Retry-After is retried after the advertised delay, then completes', async () => {
    const service = await client();
    server.enqueue(errorResponse(429, 'Rate limit reached for test-model', { 'retry-after': '1' }), textResponse(['second time lucky']));
    const run = await start(service);
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('second time lucky') });
    expect(server.requests).toHaveLength(2);
    const gap = server.requests[1]!.receivedAt - server.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(900);
  });

  it('a 500 that persists past maxRetries ends in error with the API message in the diagnostic', async () => {
    const service = await client();
    server.enqueue(errorResponse(500, 'upstream exploded: E500-XYZ'), errorResponse(500, 'upstream exploded: E500-XYZ'));
    const run = await start(service);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('upstream exploded: E500-XYZ');
    // maxRetries: 1 → exactly two attempts.
    expect(server.requests).toHaveLength(2);
  });

  it('a malformed chunk ends the run in error, without a retry', async () => {
    const service = await client();
    server.enqueue({ type: 'stream', steps: [role(), say('half an answer'), { raw: 'data: {"id": oops, not json\n\n' }, finish('stop'), { done: true }] });
    const run = await start(service);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/malformed|JSON/i);
    expect(server.requests).toHaveLength(1);
  });

  it('a stream that stalls (keep-alives only) ends in error naming the idle timer, and the connection is dropped', async () => {
    const service = await client();
    server.enqueue({ type: 'stream', steps: [role(), { repeat: { comment: 'keep-alive' }, everyMs: 50, forMs: 8000 }] });
    const run = await start(service);
    const result = await run.result;
    const elapsed = Date.now() - server.requests[0]!.receivedAt;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/idle-timeout/);
    expect(result.diagnostic).toContain(`idleTimeoutMs=${IDLE_TIMEOUT_MS}`);
    // The keep-alives did not keep it alive, and the timer fired near its setting.
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
    expect(elapsed).toBeLessThan(IDLE_TIMEOUT_MS + 3000);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.commentsSent).toBeGreaterThan(3);
    expect(await server.requests[0]!.closed).toBe(true);
  });

  it('a stall cancelled through the AbortSignal settles aborted promptly', async () => {
    const service = await client();
    server.enqueue({ type: 'stream', steps: [role(), { repeat: { comment: 'keep-alive' }, everyMs: 50, forMs: 8000 }] });
    const controller = new AbortController();
    const run = await start(service, { signal: controller.signal });
    await server.waitForRequests(1);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    controller.abort();
    const result = await run.result;
    // Well before the idle timer could have ended it.
    expect(since(t0)).toBeLessThan(IDLE_TIMEOUT_MS - 100);
    expect(result.stopReason).toBe('aborted');
    expect(await server.requests[0]!.closed).toBe(true);
  });
});

describe('start-time capabilities', () => {
  it('a persona reaches the server as the system message, rendered with its variables', async () => {
    const service = await client();
    server.enqueue(textResponse(['ok']));
    const run = await start(service, { persona: 'You are the e2e reviewer (depth {{depth}}) working in {{cwd}}.' });
    expect((await run.result).stopReason).toBe('completed');
    const system = server.messages(0).filter((m) => m.role === 'system');
    expect(system.map(contentText)).toEqual([`You are the e2e reviewer (depth 1) working in ${workspace}.`]);
  });

  it('a persona with an unknown {{variable}} is rejected as INVALID_REQUEST naming /persona', async () => {
    const service = await client();
    const error = await rejection(start(service, { persona: 'Hello {{nobody_knows_me}}' }));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.details.field).toBe('/persona');
    expect(error.message).toContain('nobody_knows_me');
    expect(server.requests).toHaveLength(0);
  });

  it('toolFilter deny hides a tool from the server and refuses a call to it anyway', async () => {
    const service = await client();
    server.enqueue(toolCallResponse([{ id: 'call_sneaky', name: 'read_file', arguments: '{"path":"notes.txt"}' }]), textResponse(['could not read']));
    const run = await start(service, { toolFilter: { deny: ['read_file'] } });
    expect((await run.result).stopReason).toBe('completed');
    const offered = (server.requests[0]!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name);
    expect(offered).not.toContain('read_file');
    expect(offered).toContain('list_directory');
    const refused = contentText(toolMessage(server.messages(1), 'call_sneaky'));
    expect(refused).toMatch(/not available/);
    expect(refused).not.toContain('PINEAPPLE');
    // The daemon's log of the child agrees: an error result for the filtered call.
    const inspected = await service.ops.inspect(run.id);
    expect(toolResults(inspected.events ?? [])).toEqual([expect.objectContaining({ name: 'read_file', isError: true })]);
  });

  it('toolFilter naming an unknown tool is INVALID_REQUEST', async () => {
    const service = await client();
    const error = await rejection(start(service, { toolFilter: { allow: ['read_file', 'teleport'] } }));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.details.field).toBe('/toolFilter');
    expect(error.message).toContain('teleport');
  });

  it('maxDepth caps the child depth (DEPTH_EXCEEDED with attemptedDepth/maxDepth); within the cap the depth is stored', async () => {
    const service = await client();
    const plain = await rejection(start(service, { parent: plainParent({ delegationDepth: 2 }), maxDepth: 2 }));
    expect(plain.code).toBe('DEPTH_EXCEEDED');
    expect(plain.details).toMatchObject({ attemptedDepth: 3, maxDepth: 2 });

    // A harness-shaped parent: the greater of stored and runtime depth counts.
    const harness: HarnessAgentLike = { session: { id: 'harness-parent', header: { cwd: workspace, delegationDepth: 0 } }, options: { subagentDepth: 2 } };
    const capped = await rejection(start(service, { parent: harness, maxDepth: 2 }));
    expect(capped.code).toBe('DEPTH_EXCEEDED');
    expect(capped.details).toMatchObject({ attemptedDepth: 3, maxDepth: 2 });

    const run = await start(service, { parent: harness, maxDepth: 3, agentOptions: { model: scripted([{ text: 'deep enough' }]) } });
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: text('deep enough') });
    const inspected = await service.ops.inspect(run.id);
    expect(inspected.header).toMatchObject({ delegationDepth: 3, parentSession: 'harness-parent', cwd: workspace });
  });

  it('structured output: an invalid capture is retried in-turn, the valid one becomes result.structured', async () => {
    const service = await client();
    const outputSchema = {
      type: 'object',
      properties: { answer: { type: 'string' }, count: { type: 'integer' } },
      required: ['answer', 'count'],
      additionalProperties: false,
    } as const;
    const model = scripted([
      { toolCalls: [{ name: 'structured_output', arguments: { answer: 'forty-two' } }] },
      { text: 'fixed it', toolCalls: [{ name: 'structured_output', arguments: { answer: 'forty-two', count: 42 } }] },
      // Never reached: the capture ends the turn without another model step.
      { text: 'SHOULD NOT RUN' },
    ]);
    const run = await start(service, { outputSchema, agentOptions: { model } });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.structured).toEqual({ answer: 'forty-two', count: 42 });
    const events = (await service.ops.inspect(run.id)).events ?? [];
    const captures = toolResults(events);
    expect(captures.map((c) => [c.name, c.isError])).toEqual([
      ['structured_output', true],
      ['structured_output', false],
    ]);
    expect(captures[0]!.text).toMatch(/count/);
    expect(events.filter((e) => e.type === 'assistant/message')).toHaveLength(2);
  });

  it('structured output: a clean finish without a capture is an error, not a success with no value', async () => {
    const service = await client();
    const outputSchema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] } as const;
    const run = await start(service, { outputSchema, agentOptions: { model: scripted([{ text: 'here is my answer in prose' }]) } });
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.structured).toBeUndefined();
    expect(result.diagnostic).toContain('structured_output');
  });

  it('an output schema outside the supported subset is UNSUPPORTED_SCHEMA', async () => {
    const service = await client();
    const error = await rejection(start(service, { outputSchema: { type: 'object', patternProperties: { '^x': { type: 'string' } } } }));
    expect(error.code).toBe('UNSUPPORTED_SCHEMA');
    expect(error.message).toContain('patternProperties');
  });
});

describe('fork', () => {
  const completedTurn: SessionEvent[] = [
    { type: 'user/message', content: text('What is the project codename?') },
    { type: 'assistant/message', content: text('The codename is BLUEBIRD.') },
    { type: 'turn/end', reason: 'completed' },
  ];
  const inFlightTurn: SessionEvent[] = [
    { type: 'user/message', content: text('Please delegate the review (IN-FLIGHT).') },
    { type: 'assistant/message', content: [], toolCalls: [{ id: 'call_delegate', name: 'subagent', arguments: '{"prompt":"review"}' }] },
  ];
  const harnessParent = (): HarnessAgentLike => ({
    session: { id: 'forking-parent', header: { cwd: workspace }, events: [...completedTurn, ...inFlightTurn] },
  });

  it("sends the parent's completed turns, not the in-flight one, and returns only the child's own message", async () => {
    const service = await client();
    server.enqueue(textResponse(['Reviewed BLUEBIRD: fine.']));
    const run = await start(service, { parent: harnessParent(), prompt: text('Review the codename.') }, 'fork');
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('Reviewed BLUEBIRD: fine.') });

    const convo = server.messages(0).filter((m) => m.role !== 'system');
    expect(convo.map((m) => [m.role, contentText(m)])).toEqual([
      ['user', 'What is the project codename?'],
      ['assistant', 'The codename is BLUEBIRD.'],
      ['user', 'Review the codename.'],
    ]);
    const wire = JSON.stringify(server.requests[0]!.body);
    expect(wire).not.toContain('IN-FLIGHT');
    expect(wire).not.toContain('call_delegate');
    const inspected = await service.ops.inspect(run.id);
    expect(inspected.header).toMatchObject({ provider: 'fork', parentSession: 'forking-parent' });
  });

  it("a fork child that says nothing returns empty output, never the parent's last message", async () => {
    const service = await client();
    server.enqueue(textResponse([]));
    const run = await start(service, { parent: harnessParent() }, 'fork');
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.output).toEqual([]);
  });

  it('parent events the daemon cannot seed from (an unanswered tool call) are INVALID_REQUEST naming /parent/events', async () => {
    const service = await client();
    const events: SessionEvent[] = [
      { type: 'user/message', content: text('hi') },
      { type: 'assistant/message', content: [], toolCalls: [{ id: 'call_dangling', name: 'read_file', arguments: '{}' }] },
      { type: 'turn/end', reason: 'completed' },
    ];
    const error = await rejection(start(service, { parent: plainParent({ events }) }, 'fork'));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.details.field).toBe('/parent/events');
    expect(error.message).toContain('call_dangling');
    expect(server.requests).toHaveLength(0);
  });
});

describe('runtime: steering and resume', () => {
  it('sendMessage during a slow step reaches the next request; resume continues the whole conversation', async () => {
    const service = await client();
    server.enqueue(
      // A slow first step: data keeps arriving (so the idle timer is satisfied) for ~1 s.
      {
        type: 'stream',
        steps: [role(), { repeat: { data: chunk({ content: '' }) }, everyMs: 50, forMs: 1000 }, say('first answer'), finish('stop'), { done: true }],
      },
      textResponse(['steered answer']),
      textResponse(['resumed answer']),
    );
    const run = await start(service, { prompt: text('Initial task') });
    expect(typeof run.sendMessage).toBe('function');
    await server.waitForRequests(1);
    run.sendMessage!(text('STEER: also check the tests'));
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('steered answer') });
    expect(clients.logged).toEqual([]); // the steering was accepted, not refused as late

    expect(server.requests).toHaveLength(2);
    expect(JSON.stringify(server.requests[0]!.body)).not.toContain('STEER');
    const second = server.messages(1).filter((m) => m.role !== 'system');
    expect(second.map((m) => [m.role, contentText(m)])).toEqual([
      ['user', 'Initial task'],
      ['assistant', 'first answer'],
      ['user', 'STEER: also check the tests'],
    ]);

    const before = await service.ops.inspect(run.id);
    const resumed = runs.track((await run.resume!(text('Follow-up: summarise'))) as RemoteSubagentRun);
    expect(resumed.id).not.toBe(run.id);
    expect(resumed.childId).toBe(run.childId);
    expect(await resumed.result).toMatchObject({ stopReason: 'completed', output: text('resumed answer') });

    const third = server.messages(2).filter((m) => m.role !== 'system');
    expect(third.map((m) => [m.role, contentText(m)])).toEqual([
      ['user', 'Initial task'],
      ['assistant', 'first answer'],
      ['user', 'STEER: also check the tests'],
      ['assistant', 'steered answer'],
      ['user', 'Follow-up: summarise'],
    ]);
    const after = await service.ops.inspect(resumed.id);
    expect(after.header?.delegationDepth).toBe(before.header?.delegationDepth);
    expect(after.header?.delegationDepth).toBe(1);
    expect(after.header?.id).toBe(before.header?.id);
  });
});

describe('client-hosted tools', () => {
  it('a valid call runs the tool in the client and its text reaches the model; an invalid call never reaches execute', async () => {
    const service = await client();
    const executed: unknown[] = [];
    const model = scripted([
      { toolCalls: [{ name: 'lookup', arguments: { q: 'alpha' }, id: 'call-valid' }] },
      { toolCalls: [{ name: 'lookup', arguments: { q: 5 }, id: 'call-invalid' }] },
      { text: 'all done' },
    ]);
    const run = await start(service, {
      agentOptions: { model },
      tools: [
        {
          name: 'lookup',
          description: 'Look a term up',
          inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
          execute: async (args) => {
            executed.push(args);
            return { content: [{ type: 'text', text: `found ${(args as { q: string }).q}` }] };
          },
        },
      ],
    });
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('all done') });
    expect(executed).toEqual([{ q: 'alpha' }]);

    const events = (await service.ops.inspect(run.id)).events ?? [];
    const results = events.filter((e): e is Extract<SessionEvent, { type: 'tool/result' }> => e.type === 'tool/result');
    expect(results.map((r) => [r.callId, r.isError])).toEqual([
      ['call-valid', false],
      ['call-invalid', true],
    ]);
    expect(results[0]!.content).toEqual(text('found alpha'));
    expect(JSON.stringify(results[1]!.content)).toMatch(/Invalid arguments for lookup/);
    // Each result precedes the model step that follows it: the model saw it in its next request.
    const order = events.map((e) => (e.type === 'tool/result' ? `result:${e.callId}` : e.type === 'assistant/message' ? 'step' : e.type));
    expect(order.filter((x) => x === 'step' || x.startsWith('result:'))).toEqual(['step', 'result:call-valid', 'step', 'result:call-invalid', 'step']);
  });
});

describe('two clients on one daemon', () => {
  it('each gets its own runs, events and lifecycle; nothing crosses', async () => {
    const [a, b] = await Promise.all([client(), client()]);
    const endsA: SubagentEndEvent[] = [];
    const endsB: SubagentEndEvent[] = [];
    const startsA: string[] = [];
    const startsB: string[] = [];
    a.on('subagent/end', (e) => void endsA.push(e));
    b.on('subagent/end', (e) => void endsB.push(e));
    a.on('subagent/start', (e) => void startsA.push(e.runId));
    b.on('subagent/start', (e) => void startsB.push(e.runId));
    const eventsA: RunEvent[] = [];
    const eventsB: RunEvent[] = [];
    // Each child calls a tool hosted by its own client and waits there until the test releases
    // it: both are deterministically running at once, and a tool call routed to the wrong
    // client would show in the counts.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const gateCalls: string[] = [];
    const gate = (label: string): ClientTool => ({
      name: 'gate',
      description: 'Wait for the test',
      inputSchema: { type: 'object', properties: {} },
      execute: async () => {
        gateCalls.push(label);
        await released;
        return { content: text(`gate ${label} open`) };
      },
    });
    const childOf = (label: string): Partial<ClientStartRequest> => ({
      agentOptions: { model: scripted([{ toolCalls: [{ name: 'gate', arguments: {} }] }, { text: `answer from ${label}` }]) },
      tools: [gate(label)],
    });
    const [runA, runB] = await Promise.all([
      start(a, { ...childOf('A'), onEvent: (e) => void eventsA.push(e) }),
      start(b, { ...childOf('B'), onEvent: (e) => void eventsB.push(e) }),
    ]);
    try {
      await waitFor(() => gateCalls.length === 2, 5000);
      expect(gateCalls.sort()).toEqual(['A', 'B']);
      const running = await a.ops.runs({ state: 'running' });
      expect(running.map((r) => r.runId).sort()).toEqual([runA.id, runB.id].sort());
      expect(running.find((r) => r.runId === runA.id)?.mine).toBe(true);
      expect(running.find((r) => r.runId === runB.id)?.mine).toBe(false);
    } finally {
      release();
    }

    const [resultA, resultB] = await Promise.all([runA.result, runB.result]);
    expect(resultA.output).toEqual(text('answer from A'));
    expect(resultB.output).toEqual(text('answer from B'));
    await waitFor(() => endsA.length === 1 && endsB.length === 1, 2000);
    expect(startsA).toEqual([runA.id]);
    expect(startsB).toEqual([runB.id]);
    expect(endsA.map((e) => e.runId)).toEqual([runA.id]);
    expect(endsB.map((e) => e.runId)).toEqual([runB.id]);
    const deltas = (events: RunEvent[]) => events.flatMap((e) => (e.kind === 'text-delta' ? [e.text] : [])).join('');
    expect(deltas(eventsA)).toBe('answer from A');
    expect(deltas(eventsB)).toBe('answer from B');
    const toolResultsIn = (events: RunEvent[]) => toolResults(events.flatMap((e) => (e.kind === 'session' ? [e.event] : [])));
    expect(toolResultsIn(eventsA).map((r) => r.text)).toEqual(['gate A open']);
    expect(toolResultsIn(eventsB).map((r) => r.text)).toEqual(['gate B open']);
    // B cannot read A's child session.
    expect((await b.ops.inspect(runA.id)).events).toBeUndefined();
  });
});
