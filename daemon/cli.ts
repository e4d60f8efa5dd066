#!/usr/bin/env node
/** The `subagentd` command line: one module per command, dispatched by name. */
import { SubagentError } from '../protocol/index.js';
import { ConfigError } from './config.js';
import { daemonCommand } from './cli/daemon-command.js';

const USAGE = `usage: subagentd <command> [options]

commands:
  run PROMPT [--provider P] [--model M] [--schema FILE] [--json]   delegate one task (starts the daemon if needed)
  daemon [--stdio]                                              run the daemon in the foreground
  start                                                         start the daemon in the background
  stop [--drain] [--timeout S]                                  stop the daemon
  restart                                                       drain, stop and start again
  status [--json]                                               show the daemon's state
  runs [--state S] [--provider P] [--json]                      list runs
  inspect RUN [--json]                                          show one run
  logs [--follow]                                               print the daemon log
  connect                                                       relay stdio to the shared daemon (for editors)

common options: --socket PATH (SUBAGENTD_SOCKET), --state-dir DIR (SUBAGENTD_HOME), --config FILE (SUBAGENTD_CONFIG)
`;

const commands: Record<string, (argv: string[]) => Promise<number>> = {
  daemon: daemonCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`subagentd: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  return command(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const known = error instanceof SubagentError || error instanceof ConfigError || (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION';
    process.stderr.write(`subagentd: ${known ? (error as Error).message : String((error as Error)?.stack ?? error)}\n`);
    process.exitCode = 1;
  },
);
