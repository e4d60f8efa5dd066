/**
 * The wire's maxLength counts UTF-16 units (a string's `length`, read in O(1)), not code points
 * (which Ajv counts by walking the string; protocol/validation.ts). Schemas from users keep JSON
 * Schema's code points. Either way a text within a byte cap is within the same maxLength.
 */
import { describe, expect, it } from 'vitest';
import { str } from '../protocol/json-schema.js';
import { lazyValidator, newAjv } from '../protocol/validation.js';

const astral = '\u{1F600}'; // one code point, two UTF-16 units, four UTF-8 bytes

describe('string lengths on the wire', () => {
  it('counts UTF-16 units against our own maxLength', () => {
    const upTo4 = lazyValidator(str(4));
    expect(upTo4(astral.repeat(2))).toBeUndefined();
    expect(upTo4(astral.repeat(3))?.message).toMatch(/must NOT have more than 4 characters/);
    expect(upTo4('abcd')).toBeUndefined();
    expect(upTo4('abcde')).toBeDefined();
  });

  it('keeps code points for schemas from users', () => {
    const userSchema = newAjv({ strict: false }).compile({ type: 'string', maxLength: 4 });
    expect(userSchema(astral.repeat(3))).toBe(true);
    expect(Buffer.byteLength(astral.repeat(3))).toBeGreaterThan(astral.repeat(3).length);
  });
});
