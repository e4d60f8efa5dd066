/**
 * Our JSON Schemas against the draft-07 meta-schema. The validators at run time skip this check
 * (it compiles the whole meta-schema at every start), so it is made here, once.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { CONFIG_AJV_OPTIONS, CONFIG_SCHEMA, CONFIG_VALIDATOR_FILE, ConfigError, parseConfig } from '../daemon/config.js';
import { REPO } from './support/daemon-process.js';
import { SCRIPT_SCHEMA } from '../daemon/agent/model/scripted.js';
import { WIRE } from '../protocol/index.js';
import { SHARED_DEFINITIONS } from '../protocol/schemas.js';

/** Every schema a wire declaration carries, by "<method> params|result". */
const wireSchemas: Array<[string, object]> = [
  ...[...WIRE.toDaemon.requests, ...WIRE.toClient.requests].flatMap((r): Array<[string, object]> => [
    [`${r.method} params`, r.params],
    [`${r.method} result`, r.result],
  ]),
  ...[...WIRE.toDaemon.notifications, ...WIRE.toClient.notifications].map((n): [string, object] => [`${n.method} notification`, n.params]),
];

const metaCheck = (schema: object): unknown => {
  const ajv = new Ajv({ strict: false, allowUnionTypes: true });
  return ajv.validateSchema(schema) ? [] : ajv.errors;
};

describe('schemas against the meta-schema', () => {
  it('the check catches a malformed schema', () => {
    expect(metaCheck({ type: 'strng' })).not.toEqual([]);
    expect(metaCheck({ properties: { a: { minLength: -1 } } })).not.toEqual([]);
  });

  it('the config file schema is well-formed', () => {
    expect(metaCheck(CONFIG_SCHEMA)).toEqual([]);
  });

  it('the scripted model\'s script schema is well-formed', () => {
    expect(metaCheck(SCRIPT_SCHEMA)).toEqual([]);
  });

  it('the shared wire definitions (content blocks, session events) are well-formed', () => {
    expect(metaCheck(SHARED_DEFINITIONS)).toEqual([]);
  });

  it.each(wireSchemas)('the wire schema of %s is well-formed', (_kind, schema) => {
    expect(metaCheck(schema)).toEqual([]);
  });
});

describe('config validation, compiled on first use', () => {
  it('names an unknown setting and a bad value', () => {
    expect(() => parseConfig({ bogus: 1 }, 'c.json')).toThrow(ConfigError);
    expect(() => parseConfig({ bogus: 1 }, 'c.json')).toThrow('/bogus is not a known setting');
    expect(() => parseConfig({ maxConnections: 0 }, 'c.json')).toThrow(/\/maxConnections must be >= 1/);
  });

  it('resolves relative paths against the config file', () => {
    expect(parseConfig({ stateDir: 'state' }, '/etc/subagentd/config.json')).toEqual({ stateDir: '/etc/subagentd/state' });
  });
});

describe("the build's ahead-of-time config validator (dist/daemon/config-validator.cjs)", () => {
  const built = createRequire(import.meta.url)(join(REPO, 'dist', 'daemon', CONFIG_VALIDATOR_FILE)) as ValidateFunction & { schemaText: string };

  it('was made from the current schema (else daemon/config.ts would not use it)', () => {
    expect(built.schemaText).toBe(JSON.stringify(CONFIG_SCHEMA));
  });

  it('answers as the validator compiled at run time does, errors included', () => {
    const runtime = new Ajv(CONFIG_AJV_OPTIONS).compile(CONFIG_SCHEMA);
    const inputs: unknown[] = [
      {},
      { stateDir: 'state', requireToken: false },
      { bogus: 1, maxConnections: 0 },
      { tcp: { host: '127.0.0.1' } },
      { providers: [{ name: 'a', type: 'acp', command: 'x', permission: 'sometimes' }] },
      // A section checked by a function of its own (scripts/config-validator.ts): the same errors and paths.
      { limits: { maxConcurrentRuns: 0, bogus: true }, providerModules: [''], model: { default: 5 } },
      { cluster: { ackWaitMs: -1 }, endpoints: { '*': { maxConcurrent: 'x' } }, tools: { shell: 'yes' } },
      { limits: { maxConcurrentRuns: 4 }, worktrees: { cleanup: 'sometimes' }, tracing: 1, metrics: [] },
      [],
    ];
    for (const input of inputs) {
      expect(built(input)).toBe(runtime(input));
      expect(built.errors ?? null).toEqual(runtime.errors ?? null);
    }
    expect(built({ bogus: 1 })).toBe(false);
  });
});
