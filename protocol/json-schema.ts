/**
 * A typed JSON Schema builder: each builder returns the plain JSON Schema that Ajv compiles and,
 * at the type level only, the TypeScript type of the values it accepts (`Infer<typeof schema>`).
 * So a wire payload's shape is written once, as its schema, and its type is derived from it.
 *
 * Rules:
 * - `obj(properties, required, open)` is closed unless `open`: unknown keys are refused. An
 *   open object's type does not grow an index signature (the extra keys are forward
 *   compatibility, not data a reader may rely on).
 * - A property not in `required` is optional (`?:`, absent rather than undefined).
 * - Shapes whose schema Ajv checks with `if`/`then` (for precise field names in errors) cannot be
 *   derived: `declared<T>(schema)` names their type, which must then be the seam's (protocol/seam.ts).
 * - `seamShaped<T>()(schema)` types a derived schema as a seam type, and fails to compile when the
 *   schema accepts a value the seam type does not.
 */

/** Type-level only: the type a schema accepts. Never present at run time. */
declare const ACCEPTS: unique symbol;

/** A JSON Schema as Ajv reads it. */
export type JsonSchema = { readonly [keyword: string]: unknown };
/** A JSON Schema together with the TypeScript type of what it accepts. */
export type Schema<T> = JsonSchema & { readonly [ACCEPTS]: T };
/** The type of the values `S` accepts. */
export type Infer<S> = S extends Schema<infer T> ? T : never;

/**
 * One object type per value of its discriminant `K`: what `obj({ kind: oneOfValues([a, b]), … })`
 * accepts, split so that TypeScript narrows on `kind` (the schema stays one branch).
 */
export type SplitOn<T, K extends PropertyKey> = T extends unknown
  ? K extends keyof T
    ? T[K] extends infer V
      ? V extends unknown
        ? Simplify<Omit<T, K> & { readonly [P in K]: V }>
        : never
      : never
    : T
  : never;

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type Properties = { readonly [name: string]: Schema<unknown> };
type ObjectOf<P extends Properties, R extends keyof P> = Simplify<
  { readonly [K in keyof P as K extends R ? K : never]: Infer<P[K]> } & {
    readonly [K in keyof P as K extends R ? never : K]?: Infer<P[K]>;
  }
>;

const schema = <T>(json: JsonSchema): Schema<T> => json as Schema<T>;

/** A schema whose type cannot be derived (see the header); `T` must be the seam's declared type. */
export const declared = <T>(json: JsonSchema): Schema<T> => schema<T>(json);

/** Types a derived schema as the seam's `T`; compiles only if every value it accepts is a `T`. */
export const seamShaped =
  <T>() =>
  <S extends Schema<unknown>>(derived: S & (Infer<S> extends T ? unknown : never)): Schema<T> =>
    derived as unknown as Schema<T>;

export const str = (maxLength = 4096): Schema<string> => schema({ type: 'string', maxLength });
export const nonEmpty = (maxLength = 4096): Schema<string> => schema({ type: 'string', minLength: 1, maxLength });
export const strBetween = (minLength: number, maxLength: number): Schema<string> => schema({ type: 'string', minLength, maxLength });
/** A string matching `pattern` (its own bounds, or the ones given). */
export const matching = (pattern: string, bounds: { readonly minLength?: number; readonly maxLength?: number } = {}): Schema<string> =>
  schema({ type: 'string', pattern, ...bounds });
export const bool: Schema<boolean> = schema({ type: 'boolean' });
/** A non-negative integer. */
export const count: Schema<number> = schema({ type: 'integer', minimum: 0 });
export const integer: Schema<number> = schema({ type: 'integer' });
/** An integer of at least `minimum`. */
export const intFrom = (minimum: number): Schema<number> => schema({ type: 'integer', minimum });
export const int = (minimum: number, maximum: number): Schema<number> => schema({ type: 'integer', minimum, maximum });
/** Numbers whose semantic checks (safe integer, -0, range) belong to the service, in seam order. */
export const num: Schema<number> = schema({ type: 'number' });
/** Any JSON value (free-form payloads such as a tool's arguments). */
export const anyValue: Schema<unknown> = schema({});
/** Any object (free-form: an output schema, a session header read back as stored). */
export const anyObject: Schema<Record<string, unknown>> = schema({ type: 'object' });
/** The empty params or result: `{}` and nothing in it. */
export const empty: Schema<Record<string, never>> = schema({ type: 'object', properties: {}, required: [], additionalProperties: false });
export const nullValue: Schema<null> = schema({ type: 'null' });

export const literal = <const V extends string>(value: V): Schema<V> => schema({ const: value });
export const oneOfValues = <const V extends readonly string[]>(values: V): Schema<V[number]> => schema({ enum: values });

export const arr = <T>(items: Schema<T>, maxItems = 10_000): Schema<T[]> => schema({ type: 'array', items, maxItems });

/** An object of any keys whose values all match `values`. */
export const record = <T>(values: Schema<T>, maxProperties?: number): Schema<Record<string, T>> =>
  schema({ type: 'object', additionalProperties: values, ...(maxProperties !== undefined && { maxProperties }) });

/** Exactly one of the variants. */
export const oneOf = <V extends readonly Schema<unknown>[]>(...variants: V): Schema<Infer<V[number]>> => schema({ oneOf: variants });

/**
 * Exactly one of object variants told apart by the value of `key`: a `const` or an `enum` in
 * each, required, no value in two. A `oneOf` with an OpenAPI `discriminator`: the wire's Ajv
 * (validation.ts) then checks only the variant the value names, where a plain `oneOf` (or an
 * `if`/`then` per variant) runs every variant and builds an error object for each that fails,
 * several times the cost on a hot path (a batch's run events). A validator that ignores
 * `discriminator` reads the same `oneOf`, and accepts the same values.
 */
export const discriminated = <V extends readonly Schema<unknown>[]>(key: string, ...variants: V): Schema<Infer<V[number]>> => {
  const seen = new Set<unknown>();
  for (const variant of variants) {
    const tag = ((variant['properties'] ?? {}) as Record<string, JsonSchema>)[key];
    const values = tag?.['enum'] ?? (tag && 'const' in tag ? [tag['const']] : undefined);
    if (!Array.isArray(values) || !(variant['required'] as unknown[] | undefined)?.includes(key)) {
      throw new Error(`discriminated: a variant without a required const or enum '${key}'`);
    }
    for (const value of values) {
      if (seen.has(value)) throw new Error(`discriminated: '${key}' ${JSON.stringify(value)} names two variants`);
      seen.add(value);
    }
  }
  return schema({ type: 'object', required: [key], discriminator: { propertyName: key }, oneOf: variants });
};

/** LSP's `integer | string` (ids, tokens); string bounds apply to the string. */
export const stringOrInteger = (bounds: { readonly minLength?: number; readonly maxLength?: number } = {}): Schema<string | number> =>
  schema({ type: ['string', 'integer'], ...bounds });

/** The same schema, also accepting null (a `type` list; the other keywords apply to the non-null value). */
export const orNull = <T>(json: Schema<T>): Schema<T | null> => {
  const type = json['type'];
  return schema({ ...json, type: [...(Array.isArray(type) ? type : [type]), 'null'] });
};

/** The same schema, its type split on the discriminant `K` (see `SplitOn`). */
export const splitOn = <T, K extends PropertyKey>(json: Schema<T>, discriminant: K): Schema<SplitOn<T, K>> => {
  void discriminant; // type-level only
  return json as unknown as Schema<SplitOn<T, K>>;
};

export function obj<P extends Properties, const R extends keyof P & string = never>(
  properties: P,
  required: readonly R[] = [],
  open = false,
): Schema<ObjectOf<P, R>> {
  return schema({ type: 'object', properties, required, additionalProperties: open });
}
