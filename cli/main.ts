#!/usr/bin/env node
/**
 * The `subagentd` command line. The one place that composes both sides: the daemon command runs
 * the server, every other command is a client of the shared daemon.
 */
import { ConfigError } from '../daemon/config.js';
import { StartupError } from '../daemon/startup-error.js';
import { SubagentError } from '../protocol/index.js';
import { commonSettings, parse } from '../daemon/cli/options.js';
import { connectCommand } from './connect-command.js';
import { inspectCommand, logsCommand, restartCommand, runsCommand, startCommand, statusCommand, stopCommand } from './ops-commands.js';
import { runCommand } from './run-command.js';
import { backgroundRunCommand, childrenCommand, interruptCommand, sendCommand } from './children-commands.js';

const USAGE = `usage: subagentd <command> [options]

  run PROMPT [--provider P] [--model M] [--schema FILE] [--json] [--quiet]
                                 delegate one task to a child (starts the daemon if needed)
  run --background PROMPT [--label L] [--provider P] [--model M] [--json]
                                 start a continuable child, print its id and exit
  send CHILD MESSAGE [--wait] [--json]
                                 the child's next turn (queued while it runs; --wait: print its answer)
  interrupt CHILD [--now] [--json]
                                 stop the child's turn after the current step (--now: at once)
  children [CHILD] [--json]      continuable children (and their descendants), running or idle
  daemon [--stdio] [--idle-timeout S]
                                 run the daemon in the foreground (--stdio: one private client;
                                 --idle-timeout: exit after S seconds with no client and no run)
  start                          start the shared daemon in the background
  stop [--drain] [--timeout S]   stop it (--drain: refuse new starts, let running children finish)
  restart [--timeout S]          drain, stop and start again
  status [--json]                the daemon's state
  runs [--state S] [--provider P] [--json]
                                 runs, live and recorded
  inspect RUN [--follow] [--json]
                                 one run: its record, session header and events
  logs [--follow] [--json]       the daemon log
  connect                        relay stdio to the shared daemon (for editor extensions)
  mcp [--provider P]… [--model M]
                                 an MCP server on stdio: the pool as tools for MCP agents
  acp [--provider P] [--model M] an ACP agent on stdio: pooled children for ACP editors

options for every command:
  --socket PATH     the daemon's unix socket (env SUBAGENTD_SOCKET)
  --state-dir DIR   sessions, run index, log (env SUBAGENTD_HOME)
  --config FILE     JSON config (env SUBAGENTD_CONFIG)

models: --model scripted:FILE runs offline (see examples/); otherwise set DEEPSEEK_API_KEY, or
OPENAI_BASE_URL + OPENAI_API_KEY + SUBAGENTD_MODEL.
`;

type Command = (argv: string[]) => Promise<number>;

const seconds = (value: string | boolean | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new ConfigError(`--timeout must be a number of seconds, got ${String(value)}`);
  return n;
};

const commands: Record<string, Command> = {
  // Loaded on demand: the daemon's code is most of the CLI's start-up time.
  daemon: async (argv) => (await import('../daemon/cli/daemon-command.js')).daemonCommand(argv),
  async run(argv) {
    const { values, positionals } = parse(argv, {
      provider: { type: 'string' },
      model: { type: 'string' },
      schema: { type: 'string' },
      quiet: { type: 'boolean', short: 'q' },
      background: { type: 'boolean' },
      label: { type: 'string' },
    });
    const prompt = positionals.join(' ').trim();
    if (!prompt) throw new ConfigError('run needs a prompt: subagentd run "what to do"');
    if (values['background'] === true) {
      return backgroundRunCommand(commonSettings(values), {
        prompt,
        provider: (values['provider'] as string | undefined) ?? 'spawn',
        model: values['model'] as string | undefined,
        label: values['label'] as string | undefined,
      });
    }
    return runCommand(commonSettings(values), {
      prompt,
      provider: (values['provider'] as string | undefined) ?? 'spawn',
      model: values['model'] as string | undefined,
      schemaFile: values['schema'] as string | undefined,
      quiet: values['quiet'] === true,
    });
  },
  async send(argv) {
    const { values, positionals } = parse(argv, { wait: { type: 'boolean' } });
    const [child, ...words] = positionals;
    const message = words.join(' ').trim();
    if (!child || !message) throw new ConfigError('send needs a child and a message: subagentd send CHILD "what next"');
    return sendCommand(commonSettings(values), child, message, values['wait'] === true);
  },
  async interrupt(argv) {
    const { values, positionals } = parse(argv, { now: { type: 'boolean' } });
    if (!positionals[0]) throw new ConfigError('interrupt needs a child id: subagentd interrupt CHILD [--now]');
    return interruptCommand(commonSettings(values), positionals[0], values['now'] === true);
  },
  async children(argv) {
    const { values, positionals } = parse(argv);
    return childrenCommand(commonSettings(values), positionals[0]);
  },
  async start(argv) {
    return startCommand(commonSettings(parse(argv).values));
  },
  async stop(argv) {
    const { values } = parse(argv, { drain: { type: 'boolean' }, timeout: { type: 'string' } });
    return stopCommand(commonSettings(values), values['drain'] === true, seconds(values['timeout'], 30));
  },
  async restart(argv) {
    const { values } = parse(argv, { timeout: { type: 'string' } });
    return restartCommand(commonSettings(values), seconds(values['timeout'], 30));
  },
  async status(argv) {
    return statusCommand(commonSettings(parse(argv).values));
  },
  async runs(argv) {
    const { values } = parse(argv, { state: { type: 'string' }, provider: { type: 'string' } });
    return runsCommand(commonSettings(values), {
      ...(values['state'] !== undefined && { state: values['state'] as string }),
      ...(values['provider'] !== undefined && { provider: values['provider'] as string }),
    });
  },
  async inspect(argv) {
    const { values, positionals } = parse(argv, { follow: { type: 'boolean', short: 'f' } });
    const runId = positionals[0];
    if (!runId) throw new ConfigError('inspect needs a run id: subagentd inspect RUN (see `subagentd runs`)');
    return inspectCommand(commonSettings(values), runId, values['follow'] === true);
  },
  async logs(argv) {
    const { values } = parse(argv, { follow: { type: 'boolean', short: 'f' } });
    return logsCommand(commonSettings(values), values['follow'] === true);
  },
  async connect(argv) {
    return connectCommand(commonSettings(parse(argv).values));
  },
  mcp: async (argv) => (await import('./face-commands.js')).faceCommand('mcp', argv),
  acp: async (argv) => (await import('./face-commands.js')).faceCommand('acp', argv),
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
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
    // Our own errors say what happened and what to do; anything else is a bug, with its stack.
    const known =
      error instanceof SubagentError ||
      error instanceof ConfigError ||
      error instanceof StartupError ||
      String((error as { code?: unknown }).code ?? '').startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`subagentd: ${known ? (error as Error).message : String((error as Error)?.stack ?? error)}\n`);
    process.exitCode = 1;
  },
);
