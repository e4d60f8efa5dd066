/**
 * Checking values against JSON Schemas, and the one wording of a failure.
 *
 * Rules:
 * - Ajv is loaded, and each validator compiled, on first use: a process pays at start-up for
 *   neither (loading Ajv alone costs about 0.1 s of a cold start), and each side only for the
 *   payloads it really checks.
 * - The wire's validators come compiled from the build (scripts/wire-validators.ts writes one
 *   file per declared schema beside this module): compiling them at a connection's first messages
 *   cost ~50 ms of its first run and ~70 ms of daemon CPU, and the code generation woke V8's
 *   optimizing compiler, ~8 MiB of a lightly used daemon's RSS. A prebuilt file is used only when
 *   it was made from this very schema and these shared definitions; otherwise (running from
 *   sources, a stale dist, a schema not on the wire) the schema is compiled here as before.
 * - A failure names one field as a JSON pointer (RFC 6901; a missing or unknown key is escaped
 *   the way Ajv escapes the rest of the path) and says what is wrong with it: `describeAjvError`
 *   is the only place that turns Ajv's errors into text, for the wire and for every other schema
 *   check of ours (config file, model scripts, output schemas, tool input).
 */
import { createRequire } from 'node:module';
import type { Ajv as AjvInstance, ErrorObject, Options, ValidateFunction } from 'ajv';
import type { JsonSchema } from './json-schema.js';
import { SHARED_DEFINITIONS, sessionEvent } from './schemas.js';

/** Why a value failed: the JSON pointer of the field and what was wrong with it. */
export interface ValidationFailure {
  readonly field: string;
  /** What is wrong with the field, e.g. `is required`. */
  readonly reason: string;
  /** `<field> <reason>`, e.g. `/parent/cwd is required`. */
  readonly message: string;
}

/** A lazily compiled check: undefined when the value is valid. */
export type Validator = (value: unknown) => ValidationFailure | undefined;

export interface FailureWording {
  /** What an unknown key "is" (default: `is not allowed`). */
  readonly unknownKey?: string;
  /** Append the allowed values to an `enum` failure. */
  readonly listAllowed?: boolean;
}

/** A key as a JSON-pointer token (RFC 6901), as Ajv writes the rest of the path. */
const pointerToken = (key: unknown): string => String(key).replace(/~/g, '~0').replace(/\//g, '~1');

/** The one wording of an Ajv error: the field it names and `<field> <why>`. */
export function describeAjvError(error: ErrorObject | undefined, wording: FailureWording = {}): ValidationFailure {
  if (!error) return { field: '/', reason: 'is invalid', message: '/ is invalid' };
  const missing = error.keyword === 'required' ? `/${pointerToken(error.params['missingProperty'])}` : '';
  const extra = error.keyword === 'additionalProperties' ? `/${pointerToken(error.params['additionalProperty'])}` : '';
  // A `discriminated` value whose tag names no variant: the tag is the field that is wrong.
  const tag = error.keyword === 'discriminator' ? `/${pointerToken(error.params['tag'])}` : '';
  const field = `${error.instancePath}${missing}${extra}${tag}` || '/';
  const why =
    error.keyword === 'required'
      ? 'is required'
      : error.keyword === 'additionalProperties'
        ? (wording.unknownKey ?? 'is not allowed')
        : error.keyword === 'discriminator'
          ? error.params['error'] === 'mapping'
            ? 'must be equal to one of the allowed values'
            : 'must be string'
          : (error.message ?? 'is invalid');
  const allowed = wording.listAllowed && error.keyword === 'enum' ? ` (${(error.params['allowedValues'] as unknown[]).join(', ')})` : '';
  const reason = `${why}${allowed}`;
  return { field, reason, message: `${field} ${reason}` };
}

/** Every error of a validation, worded one by one and joined (for checks that report them all). */
export function describeAjvErrors(errors: readonly ErrorObject[] | null | undefined, wording: FailureWording = {}): string {
  if (!errors || errors.length === 0) return describeAjvError(undefined).message;
  return errors.map((error) => describeAjvError(error, wording).message).join('; ');
}

const load = createRequire(import.meta.url);
let ajvClass: (new (options: Options) => AjvInstance) | undefined;

/**
 * A new Ajv, the package loaded on the first call: every schema check of ours (wire, config
 * file, model scripts, output schemas, tool input) makes its Ajv here, so a process that checks
 * nothing never loads it (about 65 modules and 5–10 MiB of an idle daemon's memory).
 */
export function newAjv(options: Options): AjvInstance {
  ajvClass ??= (load('ajv') as { Ajv: new (options: Options) => AjvInstance }).Ajv;
  return new ajvClass(options);
}

/**
 * The wire's Ajv options, the same at run time and for the build's prebuilt validators.
 * No meta-schema check of our schemas at run time (it compiles the whole draft-07 meta-schema):
 * test/schema-meta.spec.ts checks them once. `discriminator`: a `discriminated` value
 * (json-schema.ts) is checked against the one variant its tag names. `unicode: false`: our
 * maxLength counts UTF-16 units (the string's length), not code points, which Ajv counts by
 * walking the whole string: on runs of 64 KiB outputs that walk was 9% of the daemon's CPU.
 * A text within a byte cap is still within the same maxLength (its UTF-16 length ≤ its UTF-8 bytes).
 * Schemas from users (output schemas, tool inputs) keep JSON Schema's code points. Ajv marks the
 * option deprecated and warns on the console; `logger: false` keeps that out of a client's
 * stderr (with strict off and the meta-schema check in the tests, it has nothing else to say).
 */
export const WIRE_AJV_OPTIONS = { allErrors: false, strict: false, allowUnionTypes: true, validateSchema: false, discriminator: true, unicode: false, logger: false } as const;

/** The folder of the build's prebuilt wire validators, beside this module in dist/. */
export const WIRE_VALIDATORS_DIR = 'wire-validators';

/** What scripts/wire-validators.ts writes as the folder's `index.cjs`. */
export interface PrebuiltIndex {
  /** `SHARED_DEFINITIONS` as JSON, as the files were compiled against it. */
  readonly definitions: string;
  /** Each schema's JSON → the file (in the folder) of its compiled validator. */
  readonly files: Readonly<Record<string, string>>;
}

/** Finds the prebuilt validator of a schema in one folder; undefined when there is none for it. */
export type PrebuiltLookup = (schema: JsonSchema) => ValidateFunction | undefined;

/** The prebuilt validators in `folder` (a file URL ending in `/`); a lookup that finds none when the folder is missing or stale. */
export function prebuiltValidators(folder: URL): PrebuiltLookup {
  let index: PrebuiltIndex | undefined;
  try {
    const read = load(new URL('index.cjs', folder).pathname) as PrebuiltIndex;
    if (read.definitions === JSON.stringify(SHARED_DEFINITIONS)) index = read;
  } catch {
    index = undefined;
  }
  if (!index) return () => undefined;
  const { files } = index;
  return (schema) => {
    const text = JSON.stringify(schema);
    return Object.hasOwn(files, text) ? (load(new URL(files[text]!, folder).pathname) as ValidateFunction) : undefined;
  };
}

let ownPrebuilt: PrebuiltLookup | undefined;
let wireAjv: AjvInstance | undefined;

/** The wire's Ajv, loaded on first use, with the shared definitions (content blocks, session events) registered once. */
function wireCompiler(): AjvInstance {
  if (!wireAjv) {
    wireAjv = newAjv(WIRE_AJV_OPTIONS);
    wireAjv.addSchema(SHARED_DEFINITIONS);
  }
  return wireAjv;
}

/** A wire payload's check: the build's when it has one, else compiled when it first runs. */
export function lazyValidator(schema: JsonSchema): Validator {
  let validate: ValidateFunction | undefined;
  return (value) => {
    validate ??= (ownPrebuilt ??= prebuiltValidators(new URL(`./${WIRE_VALIDATORS_DIR}/`, import.meta.url)))(schema) ?? wireCompiler().compile(schema);
    return validate(value) ? undefined : describeAjvError(validate.errors?.[0]);
  };
}

/** Checks one session event (a stored session log line) against the wire's schema. */
export const validateSessionEvent: Validator = lazyValidator(sessionEvent);
