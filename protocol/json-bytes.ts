/**
 * The UTF-8 size of `JSON.stringify(value)`, counted without building the JSON. A writer that
 * keeps a message unserialised while its peer is not reading (common/frame-writer.ts) still
 * needs its exact size on the wire for its byte bound; serialising only to measure would make
 * the very copy it avoids keeping.
 *
 * Exact for what the wire carries (plain objects, arrays, strings, finite numbers, booleans,
 * null, and the values JSON.stringify leaves out or writes as null); anything with a `toJSON` is
 * measured by serialising it.
 */

/**
 * Candidates for an escape: `"` and `\` take one more byte; of the control characters (Cc), those
 * under U+0020 take one or five more (U+007F to U+009F are written as they are).
 */
const ESCAPED = /["\\]|\p{Cc}/gu;
/** A UTF-16 surrogate without its pair: JSON.stringify writes it as `\udXXX` (six bytes, not three). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** \b \t \n \f \r: written as two characters. */
const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

export function jsonBytes(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return stringBytes(value);
    case 'number':
      return Number.isFinite(value) ? String(value).length : 4;
    case 'boolean':
      return value ? 4 : 5;
    case 'object':
      return value === null ? 4 : objectBytes(value);
    case 'bigint':
      // JSON.stringify throws for it: so does this.
      return Buffer.byteLength(JSON.stringify(value), 'utf8');
    default:
      // undefined, functions and symbols: left out of objects, null in arrays (see the callers).
      return 0;
  }
}

/** Left out of an object, null in an array. */
const omitted = (value: unknown): boolean => value === undefined || typeof value === 'function' || typeof value === 'symbol';

function objectBytes(value: object): number {
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (Array.isArray(value)) {
    let bytes = 2 + Math.max(0, value.length - 1);
    for (const item of value as unknown[]) bytes += omitted(item) ? 4 : jsonBytes(item);
    return bytes;
  }
  let bytes = 2;
  let first = true;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (omitted(item)) continue;
    bytes += (first ? 0 : 1) + stringBytes(key) + 1 + jsonBytes(item);
    first = false;
  }
  return bytes;
}

function stringBytes(text: string): number {
  if (LONE_SURROGATE.test(text)) return Buffer.byteLength(JSON.stringify(text), 'utf8');
  let bytes = Buffer.byteLength(text, 'utf8') + 2;
  ESCAPED.lastIndex = 0;
  for (let match = ESCAPED.exec(text); match !== null; match = ESCAPED.exec(text)) {
    const code = match[0].charCodeAt(0);
    if (code >= 0x7f) continue;
    bytes += code === 0x22 || code === 0x5c || SHORT_ESCAPES.has(code) ? 1 : 5;
  }
  return bytes;
}
