/**
 * Node's on-disk compile cache (V8 code for every module loaded after it is on, Node ≥ 22.8): a
 * warm start skips compiling our modules and the packages' again. Commands turn it on before
 * their code loads; the daemon only once it is up, for what it loads later (daemon-command.ts).
 * It is per user, in the XDG cache dir ($XDG_CACHE_HOME/subagentd/node-compile-cache, else
 * ~/.cache/…), never a shared temp dir: what is in it is code we run. Node's own variables win:
 * NODE_COMPILE_CACHE picks another dir, NODE_DISABLE_COMPILE_CACHE=1 turns it off. Node writes
 * the new entries at exit.
 * Failures: a dir that cannot be created or written (read-only home, no home) loses the cache only;
 * Node reports it in the status it returns and compiles as usual. Entries are keyed by file and
 * checked against the source, so a rebuilt or upgraded file is recompiled, never run stale.
 */
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Turns the cache on for every module loaded from now on; call it before importing the rest. */
export function enableCompileCache(env: NodeJS.ProcessEnv = process.env): void {
  // Absent before Node 22.8; `engines` allows any 22.
  if (typeof nodeModule.enableCompileCache !== 'function') return;
  const dir = cacheDir(env);
  if (dir === undefined) return;
  try {
    nodeModule.enableCompileCache(dir);
  } catch {
    // Only the cache is lost.
  }
}

function cacheDir(env: NodeJS.ProcessEnv): string | undefined {
  if (env['NODE_COMPILE_CACHE']) return env['NODE_COMPILE_CACHE'];
  let base = env['XDG_CACHE_HOME'];
  if (!base) {
    try {
      base = join(homedir(), '.cache');
    } catch {
      return undefined;
    }
  }
  return join(base, 'subagentd', 'node-compile-cache');
}
