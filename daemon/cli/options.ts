/** Flags shared by every command, resolved flag → env → config file → XDG default. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, type DaemonConfig } from '../config.js';
import { defaultSocketPath, defaultStateDir } from '../paths.js';
import { resolve } from 'node:path';

export const COMMON_OPTIONS = {
  socket: { type: 'string' },
  'state-dir': { type: 'string' },
  config: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

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

export function parse(argv: string[], options: NonNullable<ParseArgsConfig['options']> = {}): ParsedArgs {
  const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, allowPositionals: true, strict: true });
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

/** Flags that make a spawned daemon see the same socket, state dir and config as this command. */
export function forwardedFlags(settings: CommonSettings): string[] {
  return [
    '--socket', settings.socket,
    '--state-dir', settings.stateDir,
    ...(settings.configPath ? ['--config', settings.configPath] : []),
  ];
}
