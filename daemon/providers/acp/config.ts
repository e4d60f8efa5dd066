/**
 * Configuration of one ACP provider (one external agent command): its type, the JSON Schema of
 * its entry in the daemon's config file (daemon/config.ts validates the file with it), and its
 * validated, defaults-applied form. One home for the fields, so the file and the code never
 * disagree. Invalid configuration throws at provider creation, never at a start.
 */
import { statSync } from '../../../common/node-builtins.js';
import { resolve } from 'node:path';

/**
 * `allow` approves every request the agent asks about, its shell commands included, wherever
 * they act. `allow-in-workspace` approves only file work the agent names inside the parent's
 * cwd and refuses the rest (shell, fetch, anything unlocated): see permission-policy.ts.
 */
export type AcpPermissionPolicy = 'allow' | 'allow-in-workspace' | 'deny' | 'ask';
const POLICIES: readonly AcpPermissionPolicy[] = ['allow', 'allow-in-workspace', 'deny', 'ask'];

export interface AcpProviderConfig {
  /** Provider name in the registry. */
  readonly name: string;
  /** The agent executable: an absolute path, a path relative to the spawn cwd, or a name on PATH. */
  readonly command: string;
  readonly args?: readonly string[];
  /** Extra environment for the agent, on top of the minimal safe base (PATH, HOME, LANG). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Working directory of the agent process and of its ACP sessions (`session/new`); default: the
   * parent's cwd. A relative path is resolved against the daemon's launch directory when the
   * config loads.
   */
  readonly cwd?: string;
  /** How `session/request_permission` is answered. Default 'deny'. */
  readonly permission?: AcpPermissionPolicy;
  /** Which `fs/*` client methods are offered, rooted at the parent's cwd. Default read only. */
  readonly fileAccess?: { readonly read: boolean; readonly write: boolean };
  /**
   * Bound on each wait for a protocol answer outside a prompt turn: the handshake (spawn →
   * session created) and, on resume, the agent's answer to a cancelled turn. Default 30 s:
   * real agents load their runtime first (Qwen Code took 9.6 s on a busy machine).
   */
  readonly initializeTimeoutMs?: number;
  /**
   * Dispose ladder: wait after closing stdin, then after SIGTERM, before SIGKILL. `idleStdin`
   * caps the first wait when the agent has no prompt in flight (its turn is over): some agents
   * (codex-acp, claude-agent-acp) ignore stdin EOF, and an idle agent has nothing to finish.
   */
  readonly disposeGraceMs?: { readonly stdin: number; readonly term: number; readonly idleStdin?: number };
  /**
   * Agent processes kept spawned and `initialize`d ahead of starts (see warm-pool.ts). Default 0.
   * A start then costs `session/new` plus the prompt.
   */
  readonly warm?: number;
  /** A warm process unused this long is stopped and not replaced until the next start. Default 10 min. */
  readonly warmIdleMs?: number;
  /**
   * The operator's declaration that the agent keeps nothing of one ACP session that a later session
   * in the same process could see: only then does a process whose run chain has ended go back to
   * the warm pool, for any owner. Default false: a used process is always disposed.
   */
  readonly reuseProcesses?: boolean;
  /**
   * Cap on this provider's agent processes: those serving runs plus the warm ones (ready or still
   * initializing). A start at the cap is refused with OVERLOADED; the pool never refills past it.
   * Default: no cap beyond the daemon's `maxConcurrentRuns` (+ `warm`).
   */
  readonly maxProcesses?: number;
}

/** More warm processes than this per provider is a config mistake, not a pool. */
export const MAX_WARM = 32;

/** An entry of the config file's `providers`: an AcpProviderConfig marked `type: 'acp'`. */
export const ACP_PROVIDER_ENTRY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'type', 'command'],
  properties: {
    name: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,128}$' },
    type: { const: 'acp' },
    command: { type: 'string', minLength: 1 },
    args: { type: 'array', items: { type: 'string' } },
    env: { type: 'object', additionalProperties: { type: 'string' } },
    cwd: { type: 'string', minLength: 1 },
    permission: { enum: POLICIES },
    fileAccess: {
      type: 'object',
      additionalProperties: false,
      required: ['read', 'write'],
      properties: { read: { type: 'boolean' }, write: { type: 'boolean' } },
    },
    initializeTimeoutMs: { type: 'integer', minimum: 1 },
    disposeGraceMs: {
      type: 'object',
      additionalProperties: false,
      required: ['stdin', 'term'],
      properties: { stdin: { type: 'integer', minimum: 0 }, term: { type: 'integer', minimum: 0 }, idleStdin: { type: 'integer', minimum: 0 } },
    },
    warm: { type: 'integer', minimum: 0, maximum: MAX_WARM },
    warmIdleMs: { type: 'integer', minimum: 1 },
    reuseProcesses: { type: 'boolean' },
    maxProcesses: { type: 'integer', minimum: 1 },
  },
} as const;

export interface ResolvedAcpConfig {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string | undefined;
  readonly permission: AcpPermissionPolicy;
  readonly fileAccess: { readonly read: boolean; readonly write: boolean };
  readonly initializeTimeoutMs: number;
  readonly disposeGraceMs: { readonly stdin: number; readonly term: number; readonly idleStdin: number };
  readonly warm: number;
  readonly warmIdleMs: number;
  readonly reuseProcesses: boolean;
  readonly maxProcesses: number | undefined;
}

export const ACP_DEFAULTS = {
  permission: 'deny',
  fileAccess: { read: true, write: false },
  initializeTimeoutMs: 30_000,
  disposeGraceMs: { stdin: 6_000, term: 3_000, idleStdin: 200 },
  warm: 0,
  warmIdleMs: 600_000,
} as const;

function fail(name: string, message: string): never {
  throw new TypeError(`acp provider "${name}": ${message}`);
}

function checkDuration(name: string, field: string, value: number): number {
  // setTimeout clamps above 2^31-1 ms to 1 ms, which would turn a long grace into none.
  if (!Number.isFinite(value) || value < 0 || value > 2_147_483_647) {
    fail(name, `${field} must be a finite number of milliseconds between 0 and 2147483647`);
  }
  return value;
}

export function resolveAcpConfig(config: AcpProviderConfig): ResolvedAcpConfig {
  const name = config.name;
  if (typeof name !== 'string' || name.length === 0) throw new TypeError('acp provider: name must be a non-empty string');
  if (typeof config.command !== 'string' || config.command.length === 0) fail(name, 'command must be a non-empty string');
  const args = config.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) fail(name, 'args must be an array of strings');
  const env = config.env ?? {};
  for (const [key, value] of Object.entries(env)) {
    if (typeof value !== 'string') fail(name, `env.${key} must be a string`);
  }
  if (config.cwd !== undefined && (typeof config.cwd !== 'string' || config.cwd.length === 0)) {
    fail(name, 'cwd must be a non-empty path');
  }
  // Resolved once, here: the daemon never changes its cwd, so its launch directory is the base.
  const cwd = config.cwd === undefined ? undefined : resolve(config.cwd);
  // Checked when the config loads, so a typo fails the daemon's start, not some later run.
  if (cwd !== undefined && statSync(cwd, { throwIfNoEntry: false })?.isDirectory() !== true) {
    fail(name, `cwd ${cwd} is not an existing directory`);
  }
  const permission = config.permission ?? ACP_DEFAULTS.permission;
  if (!POLICIES.includes(permission)) fail(name, `permission must be one of ${POLICIES.map((p) => `'${p}'`).join(', ')}`);
  const fileAccess = config.fileAccess ?? ACP_DEFAULTS.fileAccess;
  if (typeof fileAccess.read !== 'boolean' || typeof fileAccess.write !== 'boolean') {
    fail(name, 'fileAccess must be { read: boolean, write: boolean }');
  }
  const grace = config.disposeGraceMs ?? ACP_DEFAULTS.disposeGraceMs;
  const warm = config.warm ?? ACP_DEFAULTS.warm;
  if (!Number.isInteger(warm) || warm < 0 || warm > MAX_WARM) fail(name, `warm must be an integer between 0 and ${MAX_WARM}`);
  const maxProcesses = config.maxProcesses;
  if (maxProcesses !== undefined && (!Number.isInteger(maxProcesses) || maxProcesses < 1)) fail(name, 'maxProcesses must be a positive integer');
  if (maxProcesses !== undefined && warm > maxProcesses) fail(name, `warm (${warm}) cannot exceed maxProcesses (${maxProcesses})`);
  if (config.reuseProcesses !== undefined && typeof config.reuseProcesses !== 'boolean') fail(name, 'reuseProcesses must be a boolean');
  return {
    name,
    command: config.command,
    args: [...args],
    env: { ...env },
    cwd,
    permission,
    fileAccess: { read: fileAccess.read, write: fileAccess.write },
    initializeTimeoutMs: checkDuration(
      name,
      'initializeTimeoutMs',
      config.initializeTimeoutMs ?? ACP_DEFAULTS.initializeTimeoutMs,
    ),
    disposeGraceMs: {
      stdin: checkDuration(name, 'disposeGraceMs.stdin', grace.stdin),
      term: checkDuration(name, 'disposeGraceMs.term', grace.term),
      idleStdin: checkDuration(name, 'disposeGraceMs.idleStdin', grace.idleStdin ?? ACP_DEFAULTS.disposeGraceMs.idleStdin),
    },
    warm,
    warmIdleMs: checkDuration(name, 'warmIdleMs', config.warmIdleMs ?? ACP_DEFAULTS.warmIdleMs),
    reuseProcesses: config.reuseProcesses ?? false,
    maxProcesses,
  };
}
