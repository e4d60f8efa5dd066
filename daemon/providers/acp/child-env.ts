/**
 * The agent process's environment and executable. The daemon's own environment may hold
 * credentials, so the child starts from a minimal safe base and gets only what config and the
 * request name explicitly.
 */
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** Variables taken from the daemon's environment: enough to find programs and decode text. */
export const SAFE_BASE_KEYS = ['PATH', 'HOME', 'LANG'] as const;

export function buildChildEnv(
  daemonEnv: NodeJS.ProcessEnv,
  configEnv: Readonly<Record<string, string>>,
  requestEnv: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of SAFE_BASE_KEYS) {
    const value = daemonEnv[key];
    if (value !== undefined) env[key] = value;
  }
  return { ...env, ...configEnv, ...requestEnv };
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    const info = await stat(path);
    if (!info.isFile()) return false;
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolve `command` to an absolute executable path. A bare name is looked up on `searchPath`,
 * which the caller builds from the daemon's base PATH and config only: a client-supplied PATH
 * must not choose which binary the daemon runs. Returns undefined when nothing executable is found.
 */
export async function resolveCommand(command: string, searchPath: string | undefined, cwd: string): Promise<string | undefined> {
  if (command.includes('/')) {
    const candidate = resolve(cwd, command);
    return (await isExecutableFile(candidate)) ? candidate : undefined;
  }
  for (const dir of (searchPath ?? '').split(delimiter)) {
    // Relative PATH entries would depend on the spawn cwd: skip them.
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}
