/**
 * The wire's declarations (protocol/messages.ts) against docs/protocol.md and against themselves:
 * - every declared message has a heading in the docs section of its direction, and every method a
 *   heading there names is declared (`$/cancelRequest`, the library's own, excepted);
 * - every declaration exported by protocol/ is in `WIRE`, once per direction and kind;
 * - every declaration has params validators, and every request result validators, that really
 *   check: a value of the wrong JSON type is refused. Only the LSP notifications that carry
 *   nothing of ours take any params;
 * - validators compile lazily: importing protocol/ (the built package, in a real node process)
 *   does not load Ajv; the first check does.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as protocol from '../protocol/index.js';
import { WIRE, WireNotification, WireRequest } from '../protocol/index.js';

const DOC = readFileSync(new URL('../docs/protocol.md', import.meta.url), 'utf8');

/** The library's own messages, documented for what the daemon does with them, never declared. */
const LIBRARY = new Set(['$/cancelRequest']);

/** Free-form params by design: LSP's `exit` and `initialized` carry nothing the daemon reads. */
const FREE_FORM_PARAMS = new Set(['exit', 'initialized']);

/** The methods named in backticks in the `###`/`####` headings of one `##` section. */
function documentedMethods(section: string): string[] {
  const start = DOC.indexOf(`\n## ${section}\n`);
  expect(start, `docs/protocol.md has a "## ${section}" section`).toBeGreaterThanOrEqual(0);
  const end = DOC.indexOf('\n## ', start + 1);
  const body = DOC.slice(start, end === -1 ? undefined : end);
  const names: string[] = [];
  for (const line of body.split('\n')) {
    if (!/^#{3,4} /.test(line)) continue;
    for (const [, name] of line.matchAll(/`([^`]+)`/g)) if (name !== undefined && !LIBRARY.has(name)) names.push(name);
  }
  return names;
}

const methods = (messages: ReadonlyArray<{ readonly method: string }>): string[] => messages.map((m) => m.method);
const sorted = (names: readonly string[]): string[] => [...names].sort();

describe('docs/protocol.md names exactly the declared messages', () => {
  it.each([
    { direction: 'client → daemon', sections: ['Handshake', 'Client → daemon requests'], declared: [...methods(WIRE.toDaemon.requests), ...methods(WIRE.toDaemon.notifications)] },
    { direction: 'daemon → client notifications', sections: ['Daemon → client notifications'], declared: methods(WIRE.toClient.notifications) },
    { direction: 'daemon → client requests', sections: ['Daemon → client requests'], declared: methods(WIRE.toClient.requests) },
  ])('$direction', ({ sections, declared }) => {
    const documented = sections.flatMap(documentedMethods);
    expect(sorted(declared.filter((m) => !documented.includes(m))), 'declared but not documented').toEqual([]);
    expect(sorted(documented.filter((m) => !declared.includes(m))), 'documented but not declared').toEqual([]);
    expect(documented.length, 'each documented once').toBe(new Set(documented).size);
  });
});

describe('the declarations', () => {
  const all = [...WIRE.toDaemon.requests, ...WIRE.toDaemon.notifications, ...WIRE.toClient.requests, ...WIRE.toClient.notifications];

  it('every one that protocol/ exports is listed in WIRE, once', () => {
    const exported = Object.entries(protocol).filter(([, value]) => value instanceof WireRequest || value instanceof WireNotification);
    expect(exported.length).toBeGreaterThan(0);
    expect(exported.filter(([, value]) => !(all as readonly unknown[]).includes(value)).map(([name]) => name), 'not in WIRE').toEqual([]);
    expect(all.length, 'no declaration listed twice').toBe(new Set(all).size);
    for (const group of [WIRE.toDaemon.requests, WIRE.toDaemon.notifications, WIRE.toClient.requests, WIRE.toClient.notifications]) {
      expect(methods(group).length, 'one declaration per method in a group').toBe(new Set(methods(group)).size);
    }
  });

  it.each(all.map((message) => ({ message, name: `${message instanceof WireRequest ? 'request' : 'notification'} ${message.method}` })))(
    '$name has params (and result) validators that check',
    ({ message }) => {
      expect(message.params, 'params schema').toBeTypeOf('object');
      if (FREE_FORM_PARAMS.has(message.method)) {
        expect(message.checkParams('anything')).toBeUndefined();
      } else {
        // Every params payload is an object: a string is refused at the root.
        expect(message.checkParams('not params')?.field).toBe('/');
      }
      if (message instanceof WireRequest) {
        expect(message.result, 'result schema').toBeTypeOf('object');
        // No result is a bare number.
        expect(message.checkResult(42)?.field, `${message.method} result`).toBe('/');
      }
    },
  );
});

describe('lazy validators', () => {
  it("importing protocol/ does not load Ajv; a wire check uses the build's validator, a schema off the wire loads Ajv", () => {
    const entry = join(import.meta.dirname, '..', 'dist', 'protocol', 'index.js');
    const validation = join(import.meta.dirname, '..', 'dist', 'protocol', 'validation.js');
    const script = `
      import { createRequire } from 'node:module';
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/node_modules/ajv/'));
      const protocol = await import(${JSON.stringify(entry)});
      const atImport = loaded();
      const failure = protocol.StartRequest.checkParams({});
      const afterCheck = loaded();
      const { lazyValidator } = await import(${JSON.stringify(validation)});
      const offWire = lazyValidator({ type: 'string' })(1);
      console.log(JSON.stringify({ atImport, afterCheck, field: failure?.field, offWire: offWire?.field, afterOffWire: loaded() }));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(JSON.parse(out)).toEqual({ atImport: false, afterCheck: false, field: '/provider', offWire: '/', afterOffWire: true });
  });
});
