/**
 * Flags shared by every command, resolved flag → env → config file → XDG default, and the daemon
 * command's own flags. Declared once with their help text: the `subagentd` usage, per-command help
 * and shell completion are all generated from these declarations.
 */
import type { ParseArgsConfig } from 'node:util';
import { parseArgs } from '../common/node-builtins.js';
import { loadConfig, type DaemonConfig } from '../daemon/config.js';
import { defaultSocketPath, defaultStateDir } from '../daemon/ops/paths.js';
import { resolve } from 'node:path';

export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** The value's placeholder in help, for string flags (e.g. `S`, `FILE`). */
  readonly value?: string;
  readonly help: string;
  /** Fixed values, offered by shell completion. */
  readonly choices?: readonly string[];
  /** May be given more than once (string flags): the value is then an array. */
  readonly multiple?: boolean;
}

export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

/** Flags every command takes. */
export const COMMON_FLAGS = {
  socket: { type: 'string', value: 'PATH', help: "the daemon's unix socket (env SUBAGENTD_SOCKET)" },
  'state-dir': { type: 'string', value: 'DIR', help: 'sessions, run index, logs (env SUBAGENTD_HOME)' },
  config: { type: 'string', value: 'FILE', help: 'JSON config (env SUBAGENTD_CONFIG)' },
  json: { type: 'boolean', help: 'machine-readable output; errors as {"error":{"code","message"}} on stdout' },
  help: { type: 'boolean', short: 'h', help: "this command's help" },
} as const satisfies FlagSpecs;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** `subagentd daemon`'s own flags. */
export const DAEMON_FLAGS = {
  stdio: { type: 'boolean', help: 'serve one private client on stdin/stdout instead of the socket' },
  'log-level': { type: 'string', value: 'LEVEL', choices: LOG_LEVELS, help: 'daemon log level (env SUBAGENTD_LOG_LEVEL; default info)' },
  'max-runs': { type: 'string', value: 'N', help: 'runs at once, for all clients together' },
  'max-runs-per-connection': { type: 'string', value: 'N', help: 'runs at once for one connection' },
  'idle-timeout': { type: 'string', value: 'S', help: 'exit after S seconds with no client and no run' },
  nats: { type: 'string', value: 'URL', help: 'join the pool on this NATS JetStream server (env SUBAGENTD_NATS; docs/cluster.md)' },
  metrics: { type: 'string', value: 'HOST:PORT', help: 'serve Prometheus metrics at http://HOST:PORT/metrics (loopback; docs/observability.md)' },
} as const satisfies FlagSpecs;

/** node:util parseArgs options for these flags. */
export function parseOptions(flags: FlagSpecs): NonNullable<ParseArgsConfig['options']> {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, flag] of Object.entries(flags)) {
    options[name] = { type: flag.type, ...(flag.short !== undefined && { short: flag.short }), ...(flag.multiple === true && { multiple: true }) };
  }
  return options;
}

export interface CommonSettings {
  readonly socket: string;
  readonly stateDir: string;
  readonly configPath: string | undefined;
  readonly config: DaemonConfig;
  readonly json: boolean;
}

export interface ParsedArgs {
  readonly values: Record<string, string | boolean | undefined>;
  readonly positionals: string[];
}

export function parse(argv: string[], flags: FlagSpecs = {}): ParsedArgs {
  const { values, positionals } = parseArgs({ args: argv, options: parseOptions({ ...COMMON_FLAGS, ...flags }), allowPositionals: true, strict: true });
  return { values: values as ParsedArgs['values'], positionals };
}

export function commonSettings(values: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): CommonSettings {
  const configPath = (values['config'] as string | undefined) ?? env['SUBAGENTD_CONFIG'];
  const config = configPath ? loadConfig(configPath) : {};
  const socketFlag = values['socket'] as string | undefined;
  const stateFlag = values['state-dir'] as string | undefined;
  return {
    socket: socketFlag ? resolve(socketFlag) : env['SUBAGENTD_SOCKET'] ? resolve(env['SUBAGENTD_SOCKET']) : (config.socket ?? defaultSocketPath(env)),
    stateDir: stateFlag ? resolve(stateFlag) : env['SUBAGENTD_HOME'] ? resolve(env['SUBAGENTD_HOME']) : (config.stateDir ?? defaultStateDir(env)),
    configPath: configPath ? resolve(configPath) : undefined,
    config,
    json: values['json'] === true,
  };
}
