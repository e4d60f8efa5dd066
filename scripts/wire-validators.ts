/**
 * Build step (after tsc): writes dist/protocol/wire-validators/, every wire schema's Ajv validator
 * compiled ahead of time (Ajv "standalone" code), one file per schema so a process loads only
 * the ones it checks, and `index.cjs`, which maps each schema's JSON to its file and carries the
 * shared definitions they were compiled against. protocol/validation.ts uses a file only when both
 * match its own schemas, and compiles at run time otherwise (running from sources, a stale dist).
 * The schemas: every message in WIRE, params and results, and the stored session event.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { WIRE } from '../protocol/messages.js';
import { SHARED_DEFINITIONS, sessionEvent } from '../protocol/schemas.js';
import { WIRE_AJV_OPTIONS, WIRE_VALIDATORS_DIR, type PrebuiltIndex } from '../protocol/validation.js';
import type { JsonSchema } from '../protocol/json-schema.js';

const declared: JsonSchema[] = [
  ...[...WIRE.toDaemon.requests, ...WIRE.toClient.requests].flatMap((request) => [request.params, request.result]),
  ...[...WIRE.toDaemon.notifications, ...WIRE.toClient.notifications].map((notification) => notification.params),
  sessionEvent,
];
// Beside the compiled protocol/validation.js: this file runs as dist/scripts/wire-validators.js.
const folder = join(import.meta.dirname, '..', 'protocol', WIRE_VALIDATORS_DIR);
rmSync(folder, { recursive: true, force: true });
mkdirSync(folder, { recursive: true });
const ajv = new Ajv({ ...WIRE_AJV_OPTIONS, code: { source: true, esm: false } });
ajv.addSchema(SHARED_DEFINITIONS);
const files: Record<string, string> = {};
for (const schema of declared) {
  const text = JSON.stringify(schema);
  if (Object.hasOwn(files, text)) continue; // messages sharing one schema share its file
  const file = `v${Object.keys(files).length}.cjs`;
  writeFileSync(join(folder, file), standaloneCode.default(ajv, ajv.compile(schema)));
  files[text] = file;
}
const index: PrebuiltIndex = { definitions: JSON.stringify(SHARED_DEFINITIONS), files };
writeFileSync(join(folder, 'index.cjs'), `module.exports = ${JSON.stringify(index)};\n`);
