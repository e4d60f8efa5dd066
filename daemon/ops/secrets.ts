/**
 * The daemon's secrets never stay in its environment, where any same-user process — a child's
 * shell tool, an ACP agent — could read them from `/proc/<daemon pid>/environ` (the kernel keeps
 * the environment the process was exec'd with, whatever Node later deletes from `process.env`).
 *
 * At start the daemon moves every secret variable (the model API keys, and the variable the
 * config's `model.apiKeyEnv` names) into a 0600 file in its 0700 state dir and re-executes
 * itself (same pid, same arguments and stdio) with an environment without them. The re-executed
 * daemon reads the file, deletes it at once, and holds the secrets in memory only: the model
 * resolver gets them, children never do (their environments are built from the request alone).
 *
 * Without `process.execve` (Node before 22.15) the secrets are removed from `process.env` only,
 * which the returned warning says; the daemon carries on.
 */
import { randomBytes, readFileSync, unlinkSync, writeFileSync } from '../../common/node-builtins.js';
import { join } from 'node:path';
import type { DaemonConfig } from '../config.js';
import { startupFailure } from './startup-error.js';

/** The variables the model configuration reads a key from (see agent/model/endpoint-config.ts). */
export const SECRET_ENV_KEYS = ['DEEPSEEK_API_KEY', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY'] as const;

/** Names the handover file for the re-executed daemon; not a secret itself. */
const HANDOVER_ENV = 'SUBAGENTD_SECRETS_FILE';

export function secretNames(config: DaemonConfig): string[] {
  return [...new Set<string>([...SECRET_ENV_KEYS, ...(config.model?.apiKeyEnv ? [config.model.apiKeyEnv] : [])])];
}

export interface TakenSecrets {
  /** The secrets, for the model configuration; never put back into `process.env`. */
  readonly values: Record<string, string>;
  /** Set when they could not be moved out of the process environment (to be logged). */
  readonly warning?: string;
}

/**
 * Takes the secrets out of the environment. In a fresh daemon holding any, this re-executes the
 * process and does not return; in the re-executed one it returns what the handover file held.
 */
export function takeSecrets(names: readonly string[], handoverDir: string): TakenSecrets {
  const handover = process.env[HANDOVER_ENV];
  if (handover !== undefined) {
    delete process.env[HANDOVER_ENV];
    return { values: readHandover(handover) };
  }
  const values: Record<string, string> = {};
  for (const name of names) {
    const value = process.env[name];
    if (value !== undefined) values[name] = value;
  }
  if (Object.keys(values).length === 0) return { values };
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !(key in values)) env[key] = value;
  for (const name of Object.keys(values)) delete process.env[name];
  // Typed by hand: the @types/node we build against is Node 20's.
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string>) => never }).execve;
  if (typeof execve !== 'function') {
    return {
      values,
      warning: `process.execve is unavailable (Node ${process.versions.node}; needs 22.15+): ${Object.keys(values).join(', ')} stay readable in /proc/${process.pid}/environ`,
    };
  }
  const file = join(handoverDir, `secrets-${process.pid}-${randomBytes(6).toString('hex')}.json`);
  try {
    writeFileSync(file, JSON.stringify(values), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    throw startupFailure(error, file);
  }
  env[HANDOVER_ENV] = file;
  execve.call(process, process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], env);
  throw new Error('unreachable: process.execve returned');
}

function readHandover(file: string): Record<string, string> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
  } catch {
    return {}; // gone or unreadable: the daemon runs without the keys, and says so when a model needs one
  } finally {
    try {
      unlinkSync(file);
    } catch {
      // already removed
    }
  }
}
