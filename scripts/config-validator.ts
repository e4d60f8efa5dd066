/**
 * Build step (after tsc): writes dist/daemon/config-validator.cjs, the config file's ajv validator
 * compiled ahead of time (ajv "standalone" code), so a daemon or command with a config file does
 * not compile the schema at every start (~50 ms of CPU and ~5 MiB). The file carries the schema
 * it was made from; daemon/config.ts uses it only when that text matches its own schema, and
 * compiles at run time otherwise (running from sources, or a stale dist).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { CONFIG_AJV_OPTIONS, CONFIG_SCHEMA, CONFIG_VALIDATOR_FILE } from '../daemon/config.js';

const ajv = new Ajv({ ...CONFIG_AJV_OPTIONS, code: { source: true, esm: false } });
const code = standaloneCode.default(ajv, ajv.compile(CONFIG_SCHEMA));
// Beside the compiled daemon/config.js: this file runs as dist/scripts/config-validator.js.
const target = join(import.meta.dirname, '..', 'daemon', CONFIG_VALIDATOR_FILE);
writeFileSync(target, `${code}\nmodule.exports.schemaText = ${JSON.stringify(JSON.stringify(CONFIG_SCHEMA))};\n`);
