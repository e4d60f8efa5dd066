/**
 * The shape of a `subagentd` command and everything derived from the table of them: argument
 * parsing, the usage text, per-command help and shell completion all read the same entries, so a
 * command's flags are declared once. Rules: a flag not declared for a command, a missing value or
 * a missing operand, or a value outside a flag's `choices`, is a UsageError (exit 2) worded for
 * people, never node's raw parseArgs text.
 */
import { parseArgs } from '../common/node-builtins.js';
import { COMMON_FLAGS, commonSettings, parseOptions, type CommonSettings, type FlagSpec, type FlagSpecs } from './options.js';

export type { FlagSpec, FlagSpecs };

export interface CommandInput {
  /** The arguments after the command name, as given. */
  readonly argv: string[];
  readonly values: Record<string, string | boolean | string[] | undefined>;
  readonly positionals: string[];
  /** Socket, state dir, config and `--json`, resolved flag → env → config → default. */
  settings(): CommonSettings;
}

export interface CommandSpec {
  readonly name: string;
  /** Operands, as shown in the usage (e.g. `PROMPT`, `RUN`). */
  readonly operands?: string;
  readonly summary: string;
  readonly flags?: FlagSpecs;
  /** Words completion offers for the first operand. */
  readonly operandChoices?: readonly string[];
  run(input: CommandInput): Promise<number>;
}

/** A mistake in how the command was called: exit 2, with the command's help pointed at. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'USAGE';
}

export function parseCommand(spec: CommandSpec, argv: string[]): CommandInput {
  let parsed: { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: parseOptions(options(spec)), allowPositionals: true, strict: true }) as typeof parsed;
  } catch (error) {
    throw new UsageError(explainParseError(spec, error as Error & { code?: string }));
  }
  checkChoices(spec, parsed.values);
  let settings: CommonSettings | undefined;
  return { argv, ...parsed, settings: () => (settings ??= commonSettings(parsed.values)) };
}

/** A flag with a closed set of values is checked here, so a wrong one names the choices, not a daemon method. */
function checkChoices(spec: CommandSpec, values: CommandInput['values']): void {
  for (const [name, flag] of Object.entries(options(spec))) {
    const given = values[name];
    if (!flag.choices || given === undefined || typeof given === 'boolean') continue;
    for (const value of Array.isArray(given) ? given : [given]) {
      if (!flag.choices.includes(value)) {
        throw new UsageError(`--${name} must be one of ${flag.choices.join(', ')} (got ${JSON.stringify(value)}); see \`subagentd help ${spec.name}\``);
      }
    }
  }
}

function explainParseError(spec: CommandSpec, error: Error & { code?: string }): string {
  const flag = /'(-{1,2}[^'\s]+)/.exec(error.message)?.[1];
  const see = `see \`subagentd help ${spec.name}\``;
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `\`${spec.name}\` has no flag ${flag ?? ''}; ${see}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return flag && options(spec)[flag.replace(/^-+/, '')]?.type === 'boolean'
        ? `${flag} takes no value; ${see}`
        : `${flag ?? 'a flag'} needs a value; ${see}`;
    default:
      return `${error.message}; ${see}`;
  }
}

const options = (spec: CommandSpec): FlagSpecs => ({ ...COMMON_FLAGS, ...spec.flags });

const flagLabel = (name: string, flag: FlagSpec): string =>
  `${flag.short ? `-${flag.short}, ` : ''}--${name}${flag.type === 'string' ? ` ${flag.value ?? 'VALUE'}` : ''}`;

function flagLines(flags: FlagSpecs): string[] {
  const entries = Object.entries(flags);
  const width = Math.max(0, ...entries.map(([name, flag]) => flagLabel(name, flag).length));
  return entries.map(([name, flag]) => `  ${flagLabel(name, flag).padEnd(width)}  ${flag.help}`);
}

const synopsis = (spec: CommandSpec): string =>
  [spec.name, spec.operands, ...Object.entries(spec.flags ?? {}).map(([name, flag]) => `[${flagLabel(name, flag)}]`)]
    .filter(Boolean)
    .join(' ');

/** The whole usage: every command with every flag, then the common flags. */
export function usage(commands: readonly CommandSpec[], footer: string): string {
  const lines = ['usage: subagentd <command> [options]', ''];
  for (const spec of commands) {
    lines.push(`  ${synopsis(spec)}`, `      ${spec.summary}`);
  }
  lines.push('', 'options for every command:', ...flagLines(COMMON_FLAGS), '', footer);
  return `${lines.join('\n')}\n`;
}

/** `subagentd help CMD` and `CMD --help`: one command, all its flags. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [`usage: subagentd ${spec.name}${spec.operands ? ` ${spec.operands}` : ''} [options]`, '', spec.summary];
  if (spec.flags && Object.keys(spec.flags).length > 0) lines.push('', 'options:', ...flagLines(spec.flags));
  lines.push('', 'options for every command:', ...flagLines(COMMON_FLAGS));
  return `${lines.join('\n')}\n`;
}

/** Every flag a command accepts, long and short, for completion. */
export function flagWords(spec: CommandSpec): string[] {
  return Object.entries(options(spec)).flatMap(([name, flag]) => [`--${name}`, ...(flag.short ? [`-${flag.short}`] : [])]);
}
