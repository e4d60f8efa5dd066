/**
 * Where the runnable CLI is, resolved from this module's own URL. The client compiles to
 * dist/client/, next to dist/cli/; under vitest it runs from client/*.ts, where the runnable
 * CLI is still the compiled one in <repo>/dist/.
 */
import { fileURLToPath } from 'node:url';

const runningFromSource = import.meta.url.endsWith('.ts');

/** The `subagentd` CLI, whose `daemon --stdio` command `connect({ spawn: 'stdio' })` runs by default. */
export function defaultDaemonCliPath(): string {
  const relative = runningFromSource ? '../dist/cli/main.js' : '../cli/main.js';
  return fileURLToPath(new URL(relative, import.meta.url));
}
