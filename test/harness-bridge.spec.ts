/**
 * The harness bridge's pure parts: a real harness parent log (test/fixtures/harness-parent-log.json,
 * written by the harness lane: `npm run refresh:harness-fixture`) translated into seed events,
 * the request mapping, and the stop-reason meeting point.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { harnessLogToSeed, isHarnessLog } from '../client/harness-log.js';
import { toParentRef } from '../client/parent-ref.js';
import { SubagentError } from '../protocol/index.js';
import { mapHarnessRequest } from '../harness/request-map.js';
import { toHarnessResult } from '../harness/stop-reason.js';
import { REPO } from './support/daemon-process.js';

const log = JSON.parse(readFileSync(join(REPO, 'test', 'fixtures', 'harness-parent-log.json'), 'utf8')) as Array<Record<string, unknown>>;

function thrown(action: () => unknown): SubagentError {
  try {
    action();
  } catch (error) {
    if (error instanceof SubagentError) return error;
    throw error;
  }
  throw new Error('expected a SubagentError');
}

describe('a real harness log as a fork seed', () => {
  it('keeps user, assistant, tool results and turn ends, folds tool calls, and cuts at the last completed turn', () => {
    expect(isHarnessLog(log)).toBe(true);
    const seed = harnessLogToSeed(log);
    expect(seed.map((event) => event.type)).toEqual([
      'user/message', 'assistant/message', 'turn/end',
      'user/message', 'assistant/message', 'tool/result', 'assistant/message', 'turn/end',
    ]);
    expect(seed[0]).toEqual({ type: 'user/message', content: [{ type: 'text', text: 'Remember the code word PLUM-7.' }] });
    expect(seed[1]).toEqual({ type: 'assistant/message', content: [{ type: 'text', text: 'Noted: PLUM-7.' }] });
    const call = seed[4] as { toolCalls?: Array<{ id: string; name: string; arguments: string }>; content: unknown[] };
    expect(call.content).toEqual([]);
    expect(call.toolCalls).toEqual([{ id: expect.any(String), name: 'subagent_fork', arguments: expect.stringContaining('recall word') }]);
    expect(seed[5]).toMatchObject({ type: 'tool/result', callId: call.toolCalls![0]!.id, name: 'subagent_fork', isError: false });
    expect(seed[7]).toEqual({ type: 'turn/end', reason: 'completed' });
  });

  it('leaves out the in-flight turn (everything after the last turn/end)', () => {
    const firstTurnEnd = log.findIndex((event) => event['type'] === 'turn/end');
    const inFlight = log.slice(0, firstTurnEnd + 6); // turn 1 plus the start of turn 2
    expect(harnessLogToSeed(inFlight).map((event) => event.type)).toEqual(['user/message', 'assistant/message', 'turn/end']);
  });

  it('goes through the client: a harness-shaped parent gets its log translated for a fork', () => {
    const parent = { session: { id: 'p-1', header: { cwd: '/work' }, events: log } };
    const ref = toParentRef(parent, { includeEvents: true });
    expect(ref.events?.[0]).toEqual({ type: 'user/message', content: [{ type: 'text', text: 'Remember the code word PLUM-7.' }] });
  });

  it('refuses a kept event it does not understand, naming its index, rather than guessing', () => {
    const broken = structuredClone(log);
    const assistantIndex = broken.findIndex((event) => event['type'] === 'assistant/message');
    (broken[assistantIndex]!['data'] as { message: { content: unknown[] } }).message.content = [{ type: 'hologram', frames: 3 }];
    const error = thrown(() => harnessLogToSeed(broken));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.data?.field).toBe(`/parent/session/events/${assistantIndex}/data/message/content/0`);
  });

  it('refuses a tool result that answers no earlier call, and an unknown turn end reason', () => {
    const orphan = structuredClone(log);
    const resultIndex = orphan.findIndex((event) => event['type'] === 'tool/result');
    const message = (orphan[resultIndex]!['data'] as { message: { content: Array<{ toolCallId: string }> } }).message;
    message.content[0]!.toolCallId = 'call_nobody';
    expect(thrown(() => harnessLogToSeed(orphan)).message).toMatch(/answers no earlier tool call \(call_nobody\)/);

    const strange = structuredClone(log);
    const endIndex = strange.findIndex((event) => event['type'] === 'turn/end');
    strange[endIndex]!['data'] = { turn: 1, reason: { kind: 'teleported' } };
    expect(thrown(() => harnessLogToSeed(strange)).data?.field).toBe(`/parent/session/events/${endIndex}/data/reason/kind`);
  });
});

describe('the harness request, field by field', () => {
  const signal = new AbortController().signal;
  const parent = { session: { id: 'p', header: { cwd: '/w' } } };

  it('maps the known fields, never forwards the parent agentOptions, and reports unknown fields', () => {
    const { request, dropped } = mapHarnessRequest(
      {
        label: 'l', prompt: [{ type: 'text', text: 'x' }], parent, signal, persona: 'p', maxDepth: 2,
        toolFilter: { allow: ['read_file'] }, outputSchema: { type: 'object' },
        agentOptions: { provider: 'deepseek', model: 'parent-model' }, descriptor: {}, futureField: 1,
      },
      { model: 'child-model' },
    );
    expect(request).toEqual({
      label: 'l', prompt: [{ type: 'text', text: 'x' }], parent, signal, persona: 'p', maxDepth: 2,
      toolFilter: { allow: ['read_file'] }, outputSchema: { type: 'object' }, agentOptions: { model: 'child-model' },
    });
    expect(dropped).toEqual(['futureField']);
  });

  it("forwards the harness's traceparent when well formed, and reports a malformed one as dropped", () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { request, dropped } = mapHarnessRequest({ prompt: [], parent, signal, traceparent }, undefined);
    expect(request.traceparent).toBe(traceparent);
    expect(dropped).toEqual([]);
    const malformed = mapHarnessRequest({ prompt: [], parent, signal, traceparent: '00-short-01' }, undefined);
    expect('traceparent' in malformed.request).toBe(false);
    expect(malformed.dropped).toEqual(['traceparent']);
  });

  it('sends no agentOptions at all when the bridge config has none', () => {
    const { request } = mapHarnessRequest({ prompt: [], parent, signal, agentOptions: { model: 'parent' } }, undefined);
    expect('agentOptions' in request).toBe(false);
  });
});

describe("subagentd's open stop reason meets the harness's closed union", () => {
  it('passes known reasons through and turns an unknown one into error, keeping the original', () => {
    expect(toHarnessResult({ output: [], stopReason: 'refusal', diagnostic: 'd' })).toEqual({ output: [], stopReason: 'refusal', diagnostic: 'd' });
    const mapped = toHarnessResult({ output: [{ type: 'text', text: 'part' }], stopReason: 'max-steps', diagnostic: 'step ceiling' });
    expect(mapped.stopReason).toBe('error');
    expect(mapped.diagnostic).toBe('the child stopped for a reason this harness does not know (max-steps): step ceiling');
    expect(mapped.output).toEqual([{ type: 'text', text: 'part' }]);
  });
});
