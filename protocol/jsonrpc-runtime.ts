/**
 * vscode-jsonrpc's run-time values, loaded with `require`. The package is CommonJS: an ES `import`
 * of it makes Node load its CommonJS export lexer and parse the package's files for their export
 * names, and keep an ES facade per file; `require` does neither. With pino loaded the same way
 * (daemon/ops/logger.ts), an idle daemon holds ≈ 0.3 MiB less (docs/architecture.md, "An idle
 * daemon's memory"). Rule: daemon-side modules take the library's values from here and its types
 * from `import type`; test/daemon-startup.e2e.ts fails if the daemon's start loads the lexer.
 * It is the same module instance an ES import gets (Node's one CommonJS cache), so `instanceof`
 * holds across both. Failures: none beyond the package's own load.
 */
import { createRequire } from 'node:module';
import type * as Jsonrpc from 'vscode-jsonrpc/node';

export const jsonrpc = createRequire(import.meta.url)('vscode-jsonrpc/node') as typeof Jsonrpc;
