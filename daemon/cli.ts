#!/usr/bin/env node
/**
 * The daemon process's own entry: `node dist/daemon/cli.js daemon [--stdio] [options]`. Clients
 * spawn this (auto-start, private stdio daemons); people use the `subagentd` command instead.
 */
import { SubagentError } from '../protocol/index.js';
import { ConfigError } from './config.js';
import { daemonCommand } from './cli/daemon-command.js';
import { StartupError } from './startup-error.js';

const [name, ...rest] = process.argv.slice(2);
if (name !== 'daemon') {
  process.stderr.write('usage: cli.js daemon [--stdio] [--socket PATH] [--state-dir DIR] [--config FILE]\n');
  process.exitCode = 2;
} else {
  daemonCommand(rest).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      const known = error instanceof SubagentError || error instanceof ConfigError || error instanceof StartupError;
      process.stderr.write(`subagentd: ${known ? (error as Error).message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
