import { describe, expect, it } from 'vitest';
import { boundDiagnostic, MAX_DIAGNOSTIC_BYTES, type SessionEvent } from '../protocol/index.js';
import { seedProblem } from '../daemon/agent/fork-seed.js';
import { interpolate, personaVariables, TemplateError } from '../daemon/agent/persona.js';
import { buildRunResult, stopReasonOf } from '../daemon/agent/run-result.js';
import { compileToolFilter } from '../daemon/agent/tools/tool-filter.js';

const say = (text: string): SessionEvent => ({ type: 'assistant/message', content: [{ type: 'text', text }] });

describe('persona templates', () => {
  const vars = personaVariables({ team: 'core', cwd: 'shadowed' }, { cwd: '/w', provider: 'spawn', depth: 2, now: new Date('2026-03-04T10:00:00Z') });

  it('interpolates known variables, built-ins winning over configured ones', () => {
    expect(interpolate('in {{cwd}} on {{ date }} via {{provider}} at depth {{depth}} for {{team}}', vars)).toBe(
      'in /w on 2026-03-04 via spawn at depth 2 for core',
    );
    expect(interpolate('plain {braces} stay', vars)).toBe('plain {braces} stay');
  });

  it('rejects an unknown variable by name and malformed braces', () => {
    const error = (() => {
      try {
        interpolate('hello {{nope}}', vars);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(TemplateError);
    expect((error as TemplateError).variable).toBe('nope');
    expect((error as Error).message).toContain('"nope"');
    expect(() => interpolate('open {{cwd', vars)).toThrow(/malformed/);
    expect(() => interpolate('stray }} here', vars)).toThrow(/malformed/);
    expect(() => interpolate('{{ 1x }}', vars)).toThrow(/malformed/);
  });
});

describe('diagnostic bound', () => {
  it('keeps short text and truncates long text visibly within 4096 UTF-8 bytes without splitting a character', () => {
    expect(boundDiagnostic('short')).toBe('short');
    for (const unit of ['a', 'é', '€', '😀']) {
      const bounded = boundDiagnostic(unit.repeat(5000));
      expect(Buffer.byteLength(bounded)).toBeLessThanOrEqual(MAX_DIAGNOSTIC_BYTES);
      expect(bounded.endsWith('…[truncated]')).toBe(true);
      expect(bounded).not.toContain('\uFFFD');
    }
  });
});

describe('fork seed balance', () => {
  const user: SessionEvent = { type: 'user/message', content: [{ type: 'text', text: 'q' }] };
  const end: SessionEvent = { type: 'turn/end', reason: 'completed' };
  const call: SessionEvent = { type: 'assistant/message', content: [], toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{}' }] };
  const result: SessionEvent = { type: 'tool/result', callId: 'c1', name: 'read_file', content: [], isError: false };

  it('accepts empty and balanced prefixes', () => {
    expect(seedProblem([])).toBeUndefined();
    expect(seedProblem([user, call, result, say('a'), end, user, say('b'), end])).toBeUndefined();
  });

  it('rejects a wrong start, a missing turn end and an unanswered tool call', () => {
    expect(seedProblem([say('a'), end])).toMatch(/start with a user\/message/);
    expect(seedProblem([user, say('a')])).toMatch(/end with a turn\/end/);
    expect(seedProblem([user, call, end])).toMatch(/c1 without a tool\/result/);
  });
});

describe('tool filter', () => {
  const known = ['read_file', 'list_directory', 'lookup'];
  it('allows or denies by name and refuses unknown names', () => {
    const allow = compileToolFilter({ allow: ['read_file'] }, known);
    expect(known.filter(allow)).toEqual(['read_file']);
    const deny = compileToolFilter({ deny: ['read_file'] }, known);
    expect(known.filter(deny)).toEqual(['list_directory', 'lookup']);
    expect(() => compileToolFilter({ deny: ['rm_rf'] }, known)).toThrow(/unknown tool "rm_rf"/);
  });
});

describe('run result', () => {
  it('maps turn ends to stop reasons, unknown ones to error', () => {
    expect(['completed', 'max-tokens', 'aborted', 'blocked', 'error', 'max-steps', 'interrupted', 'new'].map(stopReasonOf)).toEqual([
      'completed',
      'max-tokens',
      'aborted',
      'refusal',
      'error',
      'error',
      'error',
      'error',
    ]);
  });

  it('takes the last non-empty assistant message, deep-copied, and sums usage', () => {
    const usage = { promptTokens: 1, completionTokens: 2, cacheHitTokens: 3, cacheMissTokens: 4, reasoningTokens: 5 };
    const events: SessionEvent[] = [
      say('first'),
      { type: 'usage', usage },
      { type: 'assistant/message', content: [{ type: 'text', text: '' }] },
      { type: 'usage', usage },
      { type: 'turn/end', reason: 'completed' },
    ];
    const result = buildRunResult({ events, cancelled: false });
    expect(result.output).toEqual([{ type: 'text', text: 'first' }]);
    expect(result.output).not.toBe((events[0] as { content: unknown }).content);
    expect(result.usage).toEqual({ promptTokens: 2, completionTokens: 4, cacheHitTokens: 6, cacheMissTokens: 8, reasoningTokens: 10 });
    expect(result.stopReason).toBe('completed');
  });

  it('falls back to streamed text, and turns every non-completed outcome of a cancelled run into aborted', () => {
    const failed = buildRunResult({ events: [{ type: 'turn/end', reason: 'error', diagnostic: 'boom' }], cancelled: false, partialText: 'half' });
    expect(failed).toMatchObject({ stopReason: 'error', diagnostic: 'boom', output: [{ type: 'text', text: 'half' }] });
    const cancelled = buildRunResult({ events: [{ type: 'turn/end', reason: 'max-tokens' }], cancelled: true });
    expect(cancelled.stopReason).toBe('aborted');
    const completed = buildRunResult({ events: [say('done'), { type: 'turn/end', reason: 'completed' }], cancelled: true });
    expect(completed.stopReason).toBe('completed');
    expect(buildRunResult({ events: [], cancelled: false }).stopReason).toBe('error');
  });
});
