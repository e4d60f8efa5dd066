/**
 * Paths inside this package, resolved from this module's own URL. The client compiles to
 * dist/client/, next to dist/daemon/; under vitest it runs from client/*.ts, where the
 * runnable daemon is still the compiled one in <repo>/dist/.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const runningFromSource = import.meta.url.endsWith('.ts');

/** The `subagentd` CLI, whose `daemon --stdio` command `connect({ spawn: 'stdio' })` runs by default. */
export function defaultDaemonCliPath(): string {
  const relative = runningFromSource ? '../dist/cli/main.js' : '../cli/main.js';
  return fileURLToPath(new URL(relative, import.meta.url));
}

let cachedVersion: string | undefined;

/** This package's version, for `clientInfo`; '0.0.0' if package.json cannot be read. */
export function clientPackageVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  const relative = runningFromSource ? '../package.json' : '../../package.json';
  try {
    const parsed: unknown = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8'));
    const version = (parsed as { version?: unknown }).version;
    cachedVersion = typeof version === 'string' ? version : '0.0.0';
  } catch {
    cachedVersion = '0.0.0';
  }
  return cachedVersion;
}

/** This package's root folder (where package.json, examples/ and docs/ are once installed). */
export function packageRoot(): string {
  return fileURLToPath(new URL(runningFromSource ? '..' : '../..', import.meta.url));
}
