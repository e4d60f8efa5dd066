/**
 * protocol/json-bytes.ts: the UTF-8 size of JSON.stringify(value), counted without building it,
 * must be exact: the daemon's byte bound on a client that is not reading counts deferred frames
 * with it (common/frame-writer.ts).
 */
import { describe, expect, it } from 'vitest';
import { jsonBytes } from '../protocol/index.js';

const truth = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');

const strings = [
  '',
  'plain ascii',
  'quote " and backslash \\ and slash /',
  'line\nbreak\r\ttab\bbackspace\fformfeed',
  'control \u0000 \u0001 \u001f \u007f \u0085 \u009f',
  'é ünïcode ✓ 中文',
  'emoji 😀 pair',
  'lone high \ud800 end',
  'lone low \udc00 start',
  'reversed \udc00\ud800 pair',
  '\ud83d',
  'x'.repeat(70_000) + '\n' + '"'.repeat(10),
];

describe('jsonBytes', () => {
  it.each(strings.map((s) => [JSON.stringify(s).slice(0, 40), s]))('counts the string %s as JSON.stringify writes it', (_name, text) => {
    expect(jsonBytes(text)).toBe(truth(text));
  });

  it('counts numbers, booleans and null as written, non-finite numbers as null', () => {
    for (const value of [0, -0, 1, -1.5, 0.1, 1e21, 1e-7, 123456789012345680000, Number.MAX_SAFE_INTEGER, Number.NaN, Infinity, -Infinity, true, false, null]) {
      expect(jsonBytes(value), String(value)).toBe(truth(value));
    }
  });

  it('counts objects and arrays, leaving out what JSON.stringify leaves out and writing null where it does', () => {
    const values: unknown[] = [
      {},
      [],
      { a: 1 },
      { 'key "quoted"\n': 'v', ü: ['✓', null, 2] },
      { skipped: undefined, fn: () => 1, sym: Symbol('s'), kept: 'yes' },
      { onlySkipped: undefined },
      [undefined, () => 1, Symbol('s'), 'x'],
      { nested: { deeper: [{ a: [1, [2, [3, {}]]] }], date: new Date(0) } },
      { jsonrpc: '2.0', method: 'subagent/end', params: { runId: 'run_1', result: { output: [{ type: 'text', text: 'a\nb "c" 😀' }], stopReason: 'completed' } } },
    ];
    for (const value of values) expect(jsonBytes(value), JSON.stringify(value)).toBe(truth(value));
  });

  it('counts a value with toJSON as it serialises', () => {
    const value = { when: new Date(86_400_000), custom: { toJSON: () => ({ replaced: 'ü' }) } };
    expect(jsonBytes(value)).toBe(truth(value));
  });
});
