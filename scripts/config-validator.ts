/**
 * Build step (after tsc): writes dist/daemon/config-validator.cjs, the config file's ajv validator
 * compiled ahead of time (ajv "standalone" code), so a daemon or command with a config file does
 * not compile the schema at every start (~50 ms of CPU and ~5 MiB). The file carries the schema
 * it was made from; daemon/config.ts uses it only when that text matches its own schema, and
 * compiles at run time otherwise (running from sources, or a stale dist).
 *
 * Each top-level section that is an object or a list (limits, tools, providers, …) is validated by
 * a function of its own (a `$ref` that Ajv does not inline): V8 compiles a function the first
 * time it runs, so a config that leaves a section out never compiles that section's checks. With
 * one function for the whole schema, a daemon started with `{}` compiled all of it (measured:
 * 12 → 5 ms of CPU and 122 → 41 KiB of heap for require plus a first check). Errors are the same
 * as the schema's own, schemaPath included (test/schema-meta.spec.ts compares them).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { CONFIG_AJV_OPTIONS, CONFIG_SCHEMA, CONFIG_VALIDATOR_FILE } from '../daemon/config.js';

/** The schema with each structured top-level section moved behind a `$ref`, and those sections' names. */
function splitSections(schema: object): { split: object; sections: string[] } {
  const split = structuredClone(schema) as { properties: Record<string, Record<string, unknown>>; definitions?: Record<string, unknown> };
  if (split.definitions !== undefined) throw new Error('the config schema has definitions of its own: splitSections would need to keep them');
  const definitions: Record<string, unknown> = {};
  for (const [name, section] of Object.entries(split.properties)) {
    if (!['properties', 'items', 'additionalProperties', 'oneOf'].some((keyword) => keyword in section)) continue;
    definitions[name] = section;
    split.properties[name] = { $ref: `#/definitions/${name}` };
  }
  return { split: { ...split, definitions }, sections: Object.keys(definitions) };
}

const { split, sections } = splitSections(CONFIG_SCHEMA);
const ajv = new Ajv({ ...CONFIG_AJV_OPTIONS, inlineRefs: false, code: { source: true, esm: false } });
const code = withSchemaPaths(standaloneCode.default(ajv, ajv.compile(split)), sections);

/**
 * A section's function reports schema paths from its own root (`#/required`); the schema's own
 * validator says `#/properties/<section>/required`. Each function is found by the call that
 * validates its section (`validateN(data.<section>, …`), and its paths are put back under it.
 */
function withSchemaPaths(generated: string, names: readonly string[]): string {
  const sectionOf = new Map<string, string>();
  for (const match of generated.matchAll(/(validate\d+)\(data\.([A-Za-z0-9_$]+),/g)) sectionOf.set(match[1]!, match[2]!);
  if (names.some((name) => ![...sectionOf.values()].includes(name))) throw new Error('a config section has no validating call in the generated code');
  // Split at each function's start: every piece but the first is one function (and the constants after it).
  return generated
    .split(/(?=function validate\d+\()/)
    .map((piece) => {
      const section = sectionOf.get(/^function (validate\d+)\(/.exec(piece)?.[1] ?? '');
      return section === undefined ? piece : piece.replaceAll('schemaPath:"#/', `schemaPath:"#/properties/${section}/`);
    })
    .join('');
}
// Beside the compiled daemon/config.js: this file runs as dist/scripts/config-validator.js.
const target = join(import.meta.dirname, '..', 'daemon', CONFIG_VALIDATOR_FILE);
writeFileSync(target, `${code}\nmodule.exports.schemaText = ${JSON.stringify(JSON.stringify(CONFIG_SCHEMA))};\n`);
