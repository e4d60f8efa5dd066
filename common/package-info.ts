/**
 * This package's version and root folder, found from this module's own URL: it compiles to
 * dist/common/, and under vitest runs from common/*.ts. One home for the daemon's identity, the
 * client's `clientInfo`, the CLI's `--version` and the ACP provider's `clientInfo`. A
 * package.json that cannot be read (or is not ours) gives version '0.0.0'.
 */
import { readFileSync } from './node-builtins.js';
import { fileURLToPath } from 'node:url';

const rootUrl = new URL(import.meta.url.endsWith('.ts') ? '..' : '../..', import.meta.url);

let cachedVersion: string | undefined;

/** The `version` of subagentd's package.json, read once. */
export function packageVersion(): string {
  cachedVersion ??= readVersion();
  return cachedVersion;
}

function readVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('package.json', rootUrl), 'utf8')) as { name?: unknown; version?: unknown };
    return pkg.name === 'subagentd' && typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** This package's root folder (where package.json, examples/ and docs/ are once installed). */
export function packageRoot(): string {
  return fileURLToPath(rootUrl);
}
