#!/usr/bin/env node
/**
 * The `subagentd` executable, and the daemon's entry (clients spawn `main.js daemon`). It turns on
 * Node's compile cache before any other module of ours loads, then runs the command line
 * (commands.ts). Each command's own code loads only when that command runs.
 */
import { enableCompileCache } from './compile-cache.js';

enableCompileCache();
const { main } = await import('./commands.js');
main(process.argv.slice(2));
