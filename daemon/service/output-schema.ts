/**
 * The supported output-schema subset: object-rooted JSON Schema using only `type` (one string),
 * `oneOf` (two or more branches, never beside `type`), `properties`, `required`, boolean
 * `additionalProperties`, `items`, scalar `enum` / `const`, and the annotations `description`,
 * `title`, `default`, `examples`. Anything else is rejected at start, naming the violation.
 * Keywords must also fit the schema's declared `type`: `properties`, `required` and
 * `additionalProperties` only on objects, `items` only on arrays, `enum`/`const` only on scalar
 * types and with values of that type, and `required` names only declared properties. A node with
 * neither `type` nor `oneOf` carries no structural keyword (`properties`, `required`,
 * `additionalProperties`, `items`): `properties` without `type: "object"` is refused, as the
 * reference refuses it. A scalar `enum` / `const` is its own type and may stand alone.
 */
import { SubagentError } from '../../protocol/index.js';

const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);
const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples']);
const KEYWORDS = new Set(['type', 'oneOf', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const']);
/** Keywords that say what an object or array holds: meaningless on a node that declares no type. */
const TYPED_KEYWORDS = new Set(['properties', 'required', 'additionalProperties', 'items']);

export function assertObjectJsonSchema(schema: unknown): void {
  check(schema, '#', true);
}

function fail(path: string, why: string): never {
  throw new SubagentError('UNSUPPORTED_SCHEMA', `outputSchema ${path}: ${why}`, { field: `/outputSchema${path.slice(1)}` });
}

const isScalar = (v: unknown): boolean => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** Whether a scalar value is an instance of a JSON type name. */
function ofType(value: unknown, type: string): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return false;
  }
}

/** A keyword that only makes sense for one type may not sit beside a different declared type. */
function requireType(s: Record<string, unknown>, path: string, keyword: string, wanted: string): void {
  const type = s['type'];
  if (keyword in s && typeof type === 'string' && type !== wanted) fail(`${path}/${keyword}`, `${keyword} applies to type "${wanted}", not "${type}"`);
}

function check(schema: unknown, path: string, root: boolean): void {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) fail(path, 'a schema must be an object');
  const s = schema as Record<string, unknown>;
  for (const key of Object.keys(s)) {
    if (!KEYWORDS.has(key) && !ANNOTATIONS.has(key)) fail(path, `keyword "${key}" is outside the supported subset`);
  }
  if ('type' in s) {
    if (typeof s['type'] !== 'string' || !TYPES.has(s['type'])) fail(`${path}/type`, 'type must be one JSON type name');
    if ('oneOf' in s) fail(path, 'oneOf may not stand beside type');
  }
  if ('oneOf' in s) {
    const branches = s['oneOf'];
    if (!Array.isArray(branches) || branches.length < 2) fail(`${path}/oneOf`, 'oneOf needs two or more branches');
    branches.forEach((branch, i) => check(branch, `${path}/oneOf/${i}`, root));
  } else if (root && s['type'] !== 'object') {
    fail(path, 'the root must be an object schema (type "object")');
  } else if (!('type' in s)) {
    const keyword = Object.keys(s).find((key) => TYPED_KEYWORDS.has(key));
    if (keyword !== undefined) fail(`${path}/${keyword}`, `keyword "${keyword}" needs a "type" (or "oneOf") on the same node`);
  }
  for (const keyword of ['properties', 'required', 'additionalProperties']) requireType(s, path, keyword, 'object');
  requireType(s, path, 'items', 'array');
  if ('properties' in s) {
    const props = s['properties'];
    if (typeof props !== 'object' || props === null || Array.isArray(props)) fail(`${path}/properties`, 'must be an object');
    for (const [name, sub] of Object.entries(props)) check(sub, `${path}/properties/${name}`, false);
  }
  if ('required' in s) {
    const req = s['required'];
    if (!Array.isArray(req) || !req.every((r) => typeof r === 'string')) fail(`${path}/required`, 'must be an array of strings');
    const declared = (s['properties'] ?? {}) as Record<string, unknown>;
    const undeclared = req.find((name) => !Object.hasOwn(declared, name));
    if (undeclared !== undefined) fail(`${path}/required`, `names "${undeclared}", which properties does not declare`);
  }
  if ('additionalProperties' in s && typeof s['additionalProperties'] !== 'boolean') {
    fail(`${path}/additionalProperties`, 'only a boolean is supported');
  }
  if ('items' in s) check(s['items'], `${path}/items`, false);
  if ('enum' in s) {
    const values = s['enum'];
    if (!Array.isArray(values) || values.length === 0 || !values.every(isScalar)) fail(`${path}/enum`, 'must be a non-empty array of scalars');
  }
  if ('const' in s && !isScalar(s['const'])) fail(`${path}/const`, 'must be a scalar');
  const type = s['type'];
  if (typeof type === 'string') {
    for (const keyword of ['enum', 'const'] as const) {
      if (!(keyword in s)) continue;
      if (type === 'object' || type === 'array') fail(`${path}/${keyword}`, `${keyword} applies to scalar types, not "${type}"`);
      const values = keyword === 'enum' ? (s['enum'] as unknown[]) : [s['const']];
      const wrong = values.findIndex((value) => !ofType(value, type));
      if (wrong >= 0) fail(`${path}/${keyword}`, `value ${JSON.stringify(values[wrong])} is not of type "${type}"`);
    }
  }
}
