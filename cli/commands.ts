/**
 * The `subagentd` commands. The one place that composes both sides: the daemon command runs the
 * server, every other command is a client of the shared daemon. A command is one entry of
 * COMMANDS (name, operands, summary, flags, handler); usage, `help CMD`, `CMD --help` and shell
 * completion are generated from the table (see command-table.ts). Entered from main.ts.
 */
import { DAEMON_FLAGS } from './options.js';
import { RUN_STATES } from '../protocol/run-states.js';
import { packageVersion } from '../common/package-info.js';
import { commandHelp, parseCommand, usage, UsageError, type CommandInput, type CommandSpec } from './command-table.js';
import { completionScript, SHELLS } from './completion.js';
import { reportError } from './error-report.js';

// Each command's code loads when that command runs: the daemon (`daemon --stdio` is how clients
// start it) must not pay for the client side, nor a client command for the daemon or the faces.
const opsCommands = () => import('./ops-commands.js');
const childrenCommands = () => import('./children-commands.js');

const FOOTER = `models: --model scripted:FILE runs offline (see examples/); otherwise the DAEMON's environment
selects one: DEEPSEEK_API_KEY, or OPENAI_BASE_URL + OPENAI_API_KEY + SUBAGENTD_MODEL. Change it in
the daemon's env file (see \`subagentd status\`) and run \`subagentd reload\`.
\`subagentd help COMMAND\` shows one command's flags.`;

const seconds = (value: CommandInput['values'][string], fallback: number, flag = '--timeout'): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (typeof value !== 'string' || value.trim() === '' || !Number.isFinite(n) || n < 0) {
    throw new UsageError(`${flag} must be a number of seconds, got "${String(value)}"`);
  }
  return n;
};

const count = (value: CommandInput['values'][string], fallback: number, flag: string): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (typeof value !== 'string' || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`${flag} must be a positive whole number, got "${String(value)}"`);
  return n;
};

const isoTime = (value: string, flag: string): string => {
  const at = Date.parse(value);
  if (Number.isNaN(at)) throw new UsageError(`${flag} must be a date and time (ISO 8601), got "${value}"`);
  return new Date(at).toISOString();
};

const operand = (positionals: string[], what: string, example: string): string => {
  const value = positionals.join(' ').trim();
  if (!value) throw new UsageError(`${what}: ${example}`);
  return value;
};

/** The faces' flags: providers (one or repeated), the children's model and isolation. */
const faceOptions = (values: CommandInput['values']): { providers: string[]; model: string | undefined; isolation?: 'none' | 'worktree' } => {
  const provider = values['provider'];
  const isolation = values['isolation'];
  if (isolation !== undefined && isolation !== 'none' && isolation !== 'worktree') throw new UsageError(`--isolation must be none or worktree, got "${String(isolation)}"`);
  return {
    providers: typeof provider === 'string' ? [provider] : Array.isArray(provider) ? provider : [],
    model: values['model'] as string | undefined,
    ...(isolation !== undefined && { isolation }),
  };
};

const ISOLATION = { type: 'string', value: 'MODE', choices: ['none', 'worktree'], help: "worktree: each child works in its own git worktree and branch of this directory's repository" } as const;

const TIMEOUT = { type: 'string', value: 'S', help: 'seconds to wait for running children (default 30)' } as const;

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'run',
    operands: 'PROMPT',
    summary: 'delegate one task to a child (starts the daemon if needed)',
    flags: {
      provider: { type: 'string', value: 'P', help: 'the provider (default spawn; see `subagentd status`)' },
      model: { type: 'string', value: 'M', help: 'the model, or scripted:FILE to replay a script offline' },
      schema: { type: 'string', value: 'FILE', help: 'a JSON Schema the answer must match (structured output)' },
      quiet: { type: 'boolean', short: 'q', help: 'no progress on stderr' },
      background: { type: 'boolean', help: 'start a continuable child, print its id and exit (see send, interrupt, children)' },
      label: { type: 'string', value: 'L', help: "the background child's label" },
      worktree: { type: 'boolean', help: 'the child works in its own git worktree and branch of the repository here (see `subagentd worktrees`)' },
      base: { type: 'string', value: 'REF', help: 'with --worktree: the ref the worktree starts at (default HEAD)' },
    },
    run: async ({ values, positionals, settings }) => {
      const prompt = operand(positionals, 'run needs a prompt', 'subagentd run "what to do"');
      const provider = (values['provider'] as string | undefined) ?? 'spawn';
      const model = values['model'] as string | undefined;
      if (values['base'] !== undefined && values['worktree'] !== true) throw new UsageError('--base needs --worktree');
      const isolation = { worktree: values['worktree'] === true, baseRef: values['base'] as string | undefined };
      if (values['background'] === true) return (await childrenCommands()).backgroundRunCommand(settings(), { prompt, provider, model, label: values['label'] as string | undefined, ...isolation });
      return (await import('./run-command.js')).runCommand(settings(), { prompt, provider, model, schemaFile: values['schema'] as string | undefined, quiet: values['quiet'] === true, ...isolation });
    },
  },
  {
    name: 'send',
    operands: 'CHILD MESSAGE',
    summary: "a continuable child's next turn (queued while it runs)",
    flags: { wait: { type: 'boolean', help: 'wait for that turn and print its answer' } },
    run: async ({ values, positionals, settings }) => {
      const [child, ...words] = positionals;
      if (!child || words.join(' ').trim() === '') throw new UsageError('send needs a child and a message: subagentd send CHILD "what next"');
      return (await childrenCommands()).sendCommand(settings(), child, words.join(' ').trim(), values['wait'] === true);
    },
  },
  {
    name: 'interrupt',
    operands: 'CHILD',
    summary: "stop a continuable child's turn after its current step",
    flags: { now: { type: 'boolean', help: 'stop at once, not after the step' } },
    run: async ({ values, positionals, settings }) =>
      (await childrenCommands()).interruptCommand(settings(), operand(positionals, 'interrupt needs a child id', 'subagentd interrupt CHILD [--now]'), values['now'] === true),
  },
  {
    name: 'children',
    operands: '[CHILD]',
    summary: 'continuable children (and their descendants), running or idle',
    run: async ({ positionals, settings }) => (await childrenCommands()).childrenCommand(settings(), positionals[0]),
  },
  {
    name: 'daemon',
    summary: 'run the daemon in the foreground',
    flags: DAEMON_FLAGS,
    run: async ({ argv }) => (await import('./daemon-command.js')).daemonCommand(argv),
  },
  {
    name: 'start',
    summary: 'start the shared daemon in the background',
    run: async ({ settings }) => (await opsCommands()).startCommand(settings()),
  },
  {
    name: 'stop',
    summary: 'stop the daemon; returns once it has exited and released its socket and lock',
    flags: {
      drain: { type: 'boolean', help: 'refuse new starts, let running children finish (or hand them to the next daemon)' },
      timeout: TIMEOUT,
    },
    run: async ({ values, settings }) => (await opsCommands()).stopCommand(settings(), values['drain'] === true, seconds(values['timeout'], 30)),
  },
  {
    name: 'restart',
    summary: 'drain, stop and start again (running children continue in the new daemon)',
    flags: { timeout: TIMEOUT },
    run: async ({ values, settings }) => (await opsCommands()).restartCommand(settings(), seconds(values['timeout'], 30)),
  },
  {
    name: 'reload',
    summary: 'the daemon re-reads its config and environment file; new runs use them (also: SIGHUP)',
    run: async ({ settings }) => (await opsCommands()).reloadCommand(settings()),
  },
  {
    name: 'worktrees',
    operands: '[list|prune|merge RUN]',
    summary: "isolated children's git worktrees: list them, prune orphans, merge a run's branch",
    operandChoices: ['list', 'prune', 'merge'],
    run: async ({ positionals, settings }) => (await import('./worktrees-command.js')).worktreesCommand(settings(), positionals[0], positionals[1]),
  },
  {
    name: 'cancel',
    operands: 'RUN',
    summary: 'cancel any live run and its descendants, as its owner would (an operator action)',
    flags: { 'after-step': { type: 'boolean', help: 'let the current model step and its tool calls finish first' } },
    run: async ({ values, positionals, settings }) =>
      (await opsCommands()).cancelCommand(settings(), operand(positionals, 'cancel needs a run id', 'subagentd cancel RUN (see `subagentd runs`)'), values['after-step'] === true),
  },
  {
    name: 'gc',
    summary: 'apply run and session-log retention now (the daemon also does at start and daily)',
    run: async ({ settings }) => (await opsCommands()).gcCommand(settings()),
  },
  {
    name: 'ui',
    summary: 'open the live web view: prints a one-time URL served by the daemon on loopback',
    run: async ({ settings }) => (await opsCommands()).uiCommand(settings()),
  },
  {
    name: 'status',
    summary: "the daemon's state",
    run: async ({ settings }) => (await opsCommands()).statusCommand(settings()),
  },
  {
    name: 'runs',
    summary: 'runs, live and recorded',
    flags: {
      state: { type: 'string', value: 'S', choices: RUN_STATES, help: 'only runs in this state' },
      provider: { type: 'string', value: 'P', help: 'only runs of this provider' },
      since: { type: 'string', value: 'ISO', help: 'only runs started at or after this time (ISO 8601)' },
      limit: { type: 'string', value: 'N', help: 'at most N runs, newest first (default 100)' },
      cursor: { type: 'string', value: 'C', help: 'continue after the page that printed this cursor' },
    },
    run: async ({ values, settings }) =>
      (await opsCommands()).runsCommand(settings(), {
        ...(values['state'] !== undefined && { state: values['state'] as string }),
        ...(values['provider'] !== undefined && { provider: values['provider'] as string }),
        ...(typeof values['since'] === 'string' && { since: isoTime(values['since'], '--since') }),
        limit: count(values['limit'], 100, '--limit'),
        ...(typeof values['cursor'] === 'string' && { cursor: values['cursor'] }),
      }),
  },
  {
    name: 'inspect',
    operands: 'RUN',
    summary: 'one run: its record, session header and events',
    flags: { follow: { type: 'boolean', short: 'f', help: 'keep printing events while the run goes on' } },
    run: async ({ values, positionals, settings }) =>
      (await opsCommands()).inspectCommand(settings(), operand(positionals, 'inspect needs a run id', 'subagentd inspect RUN (see `subagentd runs`)'), values['follow'] === true),
  },
  {
    name: 'logs',
    summary: 'the daemon log',
    flags: {
      follow: { type: 'boolean', short: 'f', help: 'keep printing new lines' },
      run: { type: 'string', value: 'RUN', help: "only this run's lines" },
    },
    run: async ({ values, settings }) => (await opsCommands()).logsCommand(settings(), values['follow'] === true, values['run'] as string | undefined),
  },
  {
    name: 'connect',
    summary: 'relay stdio to the shared daemon (for editor extensions); starts it if needed',
    run: async ({ settings }) => (await import('./connect-command.js')).connectCommand(settings()),
  },
  {
    name: 'mcp',
    summary: 'an MCP server on stdio: the pool as tools for MCP agents (starts the daemon if needed)',
    flags: {
      provider: { type: 'string', value: 'P', multiple: true, help: 'a provider offered as a tool, repeatable (default spawn)' },
      model: { type: 'string', value: 'M', help: "the children's model, or scripted:FILE" },
      isolation: ISOLATION,
      'background-mode': {
        type: 'string',
        value: 'MODE',
        choices: ['one-shot', 'continuable'],
        help: 'one-shot (default): background calls are jobs (job_output, job_kill); continuable: they start durable children (send_message, interrupt_agent, list_agents)',
      },
    },
    run: async ({ values, settings }) => {
      // Checked against the flag's choices by parseCommand.
      const mode = values['background-mode'] as 'one-shot' | 'continuable' | undefined;
      return (await import('./mcp-command.js')).mcpCommand(settings(), { ...faceOptions(values), ...(mode !== undefined && { backgroundMode: mode }) });
    },
  },
  {
    name: 'acp',
    summary: 'an ACP agent on stdio: pooled children for ACP editors (starts the daemon if needed)',
    flags: {
      provider: { type: 'string', value: 'P', help: 'the provider of the children (default spawn)' },
      model: { type: 'string', value: 'M', help: "the children's model, or scripted:FILE" },
      isolation: ISOLATION,
    },
    run: async ({ values, settings }) => (await import('./acp-command.js')).acpCommand(settings(), faceOptions(values)),
  },
  {
    name: 'completion',
    operands: 'SHELL',
    operandChoices: SHELLS,
    summary: `print a shell completion script (${SHELLS.join(', ')})`,
    run: async ({ positionals }) => {
      const shell = operand(positionals, 'completion needs a shell', `subagentd completion ${SHELLS.join('|')}`);
      process.stdout.write(completionScript(shell, COMMANDS));
      return 0;
    },
  },
  {
    name: 'help',
    operands: '[COMMAND]',
    summary: 'this usage, or one command with all its flags',
    run: async ({ positionals }) => {
      const [name] = positionals;
      process.stdout.write(name === undefined ? usage(COMMANDS, FOOTER) : commandHelp(find(name)));
      return 0;
    },
  },
];

function find(name: string): CommandSpec {
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) throw new UsageError(`unknown command "${name}"; \`subagentd help\` lists them`);
  return spec;
}

async function runCommandLine(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    process.stderr.write(usage(COMMANDS, FOOTER));
    return 2;
  }
  if (name === '--help' || name === '-h') return find('help').run(parseCommand(find('help'), []));
  if (name === '--version' || name === '-V') {
    process.stdout.write(rest.includes('--json') ? `${JSON.stringify({ version: packageVersion() })}\n` : `subagentd ${packageVersion()}\n`);
    return 0;
  }
  const spec = find(name);
  const input = parseCommand(spec, rest);
  if (input.values['help'] === true) {
    process.stdout.write(commandHelp(spec));
    return 0;
  }
  return spec.run(input);
}

/** Runs one command line to its exit code; errors are reported here, never thrown. */
export function main(argv: string[]): void {
  // A reader that went away (`subagentd logs | head`) ends us quietly, as it does any Unix filter.
  // Not for the daemon: in stdio mode its stdout is the wire, and a lost peer is a drain, not an exit.
  if (argv[0] !== 'daemon') {
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw error;
    });
  }
  runCommandLine(argv).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.exitCode = reportError(error, argv.includes('--json'));
    },
  );
}
