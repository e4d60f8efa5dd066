#!/usr/bin/env node
/**
 * The `subagentd` executable, and the daemon's entry (clients spawn `main.js daemon`). It turns on
 * Node's compile cache before any other module of ours loads, except for the daemon, which turns
 * it on once it is up (daemon-command.ts says why) and holds V8's optimizing compiler until it
 * serves (startup-compiler.ts); then it runs the command line (commands.ts). Each command's own
 * code loads only when that command runs. A Node older than the supported one is refused first.
 */
import './require-node.js'; // first: an old Node is refused before anything else runs
import { enableCompileCache } from './compile-cache.js';
import { holdOptimizingCompiler } from './startup-compiler.js';

// The daemon turns the cache on, and releases the compiler, once it serves (daemon-command.ts).
if (process.argv[2] === 'daemon') holdOptimizingCompiler();
else enableCompileCache();
const { main } = await import('./commands.js');
main(process.argv.slice(2));
