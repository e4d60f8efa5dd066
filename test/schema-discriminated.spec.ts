/**
 * `discriminated` (protocol/json-schema.ts): object variants told apart by one key accept exactly
 * what `oneOf` of the same variants accepts, whether or not the Ajv knows `discriminator`; a
 * failure names the field within the variant, or the key when no variant has its value. Run
 * events, session events and content blocks are declared with it.
 */
import { describe, expect, it } from 'vitest';
import { discriminated, literal, obj, oneOf, oneOfValues, str } from '../protocol/json-schema.js';
import { describeAjvError, lazyValidator, newAjv } from '../protocol/validation.js';
import { RunEventNotification } from '../protocol/index.js';

const variants = [
  obj({ kind: oneOfValues(['a', 'b']), text: str(4) }, ['kind', 'text']),
  obj({ kind: literal('c'), n: obj({ x: str(2) }, ['x']) }, ['kind', 'n']),
] as const;
const byTag = lazyValidator(discriminated('kind', ...variants));
const byOneOf = lazyValidator(oneOf(...variants));
const plainAjv = newAjv({ strict: false });
const ignoringTag = plainAjv.compile(discriminated('kind', ...variants));

const values: unknown[] = [
  { kind: 'a', text: 'ok' },
  { kind: 'b', text: 'ok' },
  { kind: 'a', text: 'too long' },
  { kind: 'a' },
  { kind: 'a', text: 'ok', n: { x: '1' } },
  { kind: 'c', n: { x: '1' } },
  { kind: 'c', n: { x: 'far too long' } },
  { kind: 'c', text: 'ok' },
  { kind: 'd', text: 'ok' },
  { kind: 7, text: 'ok' },
  { text: 'ok' },
  {},
  [],
  'a',
  null,
];

describe('discriminated', () => {
  it('accepts exactly what oneOf of the same variants accepts', () => {
    for (const value of values) {
      expect(byTag(value) === undefined, JSON.stringify(value)).toBe(byOneOf(value) === undefined);
      expect(ignoringTag(value), JSON.stringify(value)).toBe(byOneOf(value) === undefined);
    }
    expect(values.filter((value) => byTag(value) === undefined)).toEqual([{ kind: 'a', text: 'ok' }, { kind: 'b', text: 'ok' }, { kind: 'c', n: { x: '1' } }]);
  });

  it('names the field that fails within the variant, or the key when no variant has its value', () => {
    expect(byTag({ kind: 'c', n: { x: 'far too long' } })?.field).toBe('/n/x');
    expect(byTag({ kind: 'd', text: 'ok' })?.message).toBe('/kind must be equal to one of the allowed values');
    expect(byTag({ kind: 7, text: 'ok' })?.message).toBe('/kind must be string');
    expect(byTag({ text: 'ok' })?.message).toBe('/kind is required');
    expect(describeAjvError({ keyword: 'discriminator', instancePath: '/a~1b', schemaPath: '#', params: { error: 'mapping', tag: 'kind', tagValue: 'x' } }).field).toBe('/a~1b/kind');
  });

  it('refuses variants it cannot tell apart', () => {
    expect(() => discriminated('kind', obj({ kind: str() }, ['kind']))).toThrow(/without a required const or enum 'kind'/);
    expect(() => discriminated('kind', obj({ kind: literal('a') }))).toThrow(/without a required const or enum 'kind'/);
    expect(() => discriminated('kind', obj({ kind: literal('a') }, ['kind']), obj({ kind: oneOfValues(['b', 'a']) }, ['kind']))).toThrow(/'kind' "a" names two variants/);
  });

  it('checks run events: each kind against its own variant', () => {
    const check = (event: unknown) => RunEventNotification.checkParams({ runId: 'run_1', event });
    expect(check({ kind: 'text-delta', text: 'hi' })).toBeUndefined();
    expect(check({ kind: 'session', event: { type: 'usage', usage: { promptTokens: 1, completionTokens: 1, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 } } })).toBeUndefined();
    expect(check({ kind: 'retry', attempt: 2, delayMs: 10, reason: 'HTTP 429' })).toBeUndefined();
    expect(check({ kind: 'retry', attempt: 1, delayMs: 10, reason: 'HTTP 429' })?.field).toBe('/event/attempt');
    expect(check({ kind: 'session', text: 'hi' })?.message).toBe('/event/event is required');
    expect(check({ kind: 'text-delta', text: 'hi', event: {} })?.field).toBe('/event/event');
    expect(check({ kind: 'thinking', text: 'hi' })?.field).toBe('/event/kind');
    expect(check({ kind: 'session', event: { type: 'usage', usage: {} } })?.message).toBe('/event/event/usage/promptTokens is required');
    expect(check({ kind: 'session', event: { type: 'user/message', content: [{ type: 'text', text: 'a' }, { type: 'image', data: 'x' }] } })?.message).toBe(
      '/event/event/content/1/mimeType is required',
    );
  });
});
