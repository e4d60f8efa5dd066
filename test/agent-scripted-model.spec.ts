import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../protocol/index.js';
import { ModelError, type ModelStepRequest } from '../daemon/agent/model/model-adapter.js';
import { createScriptedAdapter, parseScript, readScript } from '../daemon/agent/model/scripted.js';
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

function request(events: readonly SessionEvent[], overrides: Partial<ModelStepRequest> = {}): ModelStepRequest {
  return { model: 'm', system: '', events, tools: [], signal: new AbortController().signal, ...overrides };
}

describe('scripted model adapter', () => {
  it('streams the text in several deltas and returns the step', async () => {
    const adapter = createScriptedAdapter({
      steps: [{ text: 'hello from the script', reasoning: 'think', usage: { promptTokens: 7 } }],
    });
    const deltas: Array<{ kind: string; text: string }> = [];
    const step = await adapter.step(request([], { onDelta: (d) => deltas.push(d) }));
    const textDeltas = deltas.filter((d) => d.kind === 'text');
    expect(textDeltas.length).toBeGreaterThan(1);
    expect(textDeltas.map((d) => d.text).join('')).toBe('hello from the script');
    expect(deltas.filter((d) => d.kind === 'reasoning').map((d) => d.text).join('')).toBe('think');
    expect(step).toEqual({
      text: 'hello from the script',
      reasoning: 'think',
      toolCalls: [],
      finish: 'stop',
      usage: { promptTokens: 7, completionTokens: 0, cacheHitTokens: 0, cacheMissTokens: 0, reasoningTokens: 0 },
    });
  });

  it('turns object arguments into JSON, keeps string arguments raw, and defaults finish and ids', async () => {
    const adapter = createScriptedAdapter({
      steps: [{ toolCalls: [{ name: 'a', arguments: { x: 1 } }, { name: 'b', arguments: '{broken', id: 'mine' }] }],
    });
    const step = await adapter.step(request([]));
    expect(step.finish).toBe('tool_calls');
    expect(step.toolCalls).toEqual([
      { id: 'call-1-1', name: 'a', arguments: '{"x":1}' },
      { id: 'mine', name: 'b', arguments: '{broken' },
    ]);
  });

  it('keeps one cursor per child and fails clearly past the end of the script', async () => {
    const adapter = createScriptedAdapter({ steps: [{ text: 'one' }, { text: 'two' }] });
    const childA: SessionEvent[] = [];
    const childB: SessionEvent[] = [];
    expect((await adapter.step(request(childA))).text).toBe('one');
    expect((await adapter.step(request(childB))).text).toBe('one');
    expect((await adapter.step(request(childA))).text).toBe('two');
    const error = await adapter.step(request(childA)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).kind).toBe('protocol');
    expect((error as Error).message).toMatch(/2 step\(s\).*step 3/);
  });

  it('fails a step with the scripted ModelError after streaming its text', async () => {
    const adapter = createScriptedAdapter({ steps: [{ text: 'partial', error: { kind: 'http', message: 'upstream 502', status: 502 } }] });
    const deltas: string[] = [];
    const error = await adapter.step(request([], { onDelta: (d) => deltas.push(d.text) })).catch((e: unknown) => e);
    expect(deltas.join('')).toBe('partial');
    expect(error).toMatchObject({ name: 'ModelError', kind: 'http', status: 502, message: 'upstream 502' });
  });

  it('honours the abort signal during delayMs', async () => {
    const adapter = createScriptedAdapter({ steps: [{ text: 'late', delayMs: 10_000 }] });
    const controller = new AbortController();
    const started = Date.now();
    const pending = adapter.step(request([], { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    await expect(pending).rejects.toMatchObject({ kind: 'aborted' });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('validates scripts with errors naming the field', () => {
    expect(() => parseScript({ steps: [{ finish: 'done' }] })).toThrow(/\/steps\/0\/finish must be equal to one of the allowed values \(stop, tool_calls, length, content_filter\)/);
    expect(() => parseScript({ steps: [{ toolCalls: [{ name: 'x' }] }] })).toThrow(/\/steps\/0\/toolCalls\/0\/arguments/);
    expect(() => parseScript({ steps: [{ txet: 'typo' }] })).toThrow(/\/steps\/0\/txet is not a known field/);
    expect(() => parseScript({})).toThrow(/\/steps/);
    expect(() => createScriptedAdapter({ steps: [{ delayMs: -1 }] })).toThrow(ModelError);
  });

  it('reads a script file, naming the file when it is unreadable or not JSON', async () => {
    const dir = await tempDir();
    const good = join(dir, 'good.json');
    await writeFile(good, JSON.stringify({ steps: [{ text: 'hi' }] }));
    expect(readScript(good).steps).toHaveLength(1);
    const bad = join(dir, 'bad.json');
    await writeFile(bad, '{ steps: ');
    expect(() => readScript(bad)).toThrow(new RegExp(`${bad} is not valid JSON`));
    expect(() => readScript(join(dir, 'missing.json'))).toThrow(/cannot read model script .*missing\.json/);
    try {
      readScript(bad);
    } catch (error) {
      expect((error as ModelError).kind).toBe('config');
    }
  });

  it('the resolver reads a script again only when its file changed; every child replays it from the first step', async () => {
    const dir = await tempDir();
    const file = join(dir, 'script.json');
    await writeFile(file, JSON.stringify({ steps: [{ text: 'one' }, { text: 'two' }] }));
    const resolveModel = createModelResolver({ default: `scripted:${file}` }, {});
    const first = resolveModel(undefined);
    const second = resolveModel(undefined);
    expect(second.adapter).toBe(first.adapter); // unchanged file: not read and checked again
    const childA: SessionEvent[] = [];
    const childB: SessionEvent[] = [];
    expect((await first.adapter.step(request(childA))).text).toBe('one');
    expect((await second.adapter.step(request(childB))).text).toBe('one');
    expect((await first.adapter.step(request(childA))).text).toBe('two');
    await writeFile(file, JSON.stringify({ steps: [{ text: 'rewritten, and longer' }] }));
    const third = resolveModel(undefined);
    expect(third.adapter).not.toBe(first.adapter);
    expect((await third.adapter.step(request([]))).text).toBe('rewritten, and longer');
    await writeFile(file, '{ broken');
    expect(() => resolveModel(undefined)).toThrow(/is not valid JSON/);
  });
});
