/**
 * The daemon's config file: JSON, validated by ajv, every error naming the bad field; relative
 * paths resolve against the file's folder. Flags and env override what the file says
 * (cli/options.ts resolves flag → env → file → default; cli/daemon-command.ts applies the rest).
 */
import { readFileSync } from '../common/node-builtins.js';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { MAX_TEXT_BYTES, describeAjvErrors } from '../protocol/index.js';
import { newAjv } from '../protocol/validation.js';
import { ACP_PROVIDER_ENTRY_SCHEMA, type AcpProviderConfig } from './providers/acp/config.js';
import type { EndpointLimits } from './upstream/governor.js';

/** A configured ACP agent; its fields and their schema live with the provider (providers/acp/config.ts). */
export type AcpProviderEntry = AcpProviderConfig & { readonly type: 'acp' };

export interface DaemonConfig {
  readonly socket?: string;
  readonly stateDir?: string;
  /** Largest inbound frame in bytes (default 4 MiB). */
  readonly maxFrameBytes?: number;
  /** Require the per-daemon token at `initialize` (default true). */
  readonly requireToken?: boolean;
  /** Modules exporting `createProviders(context)` → trusted same-process providers. Relative to the config file. */
  readonly providerModules?: string[];
  readonly providers?: AcpProviderEntry[];
  readonly model?: {
    /** Default model: a name for the configured endpoint, or `scripted:FILE`. */
    readonly default?: string;
    readonly baseUrl?: string;
    /** Name of the env variable holding the API key (the key itself never goes in the file). */
    readonly apiKeyEnv?: string;
    readonly idleTimeoutMs?: number;
    readonly stepTimeoutMs?: number;
    readonly maxRetries?: number;
  };
  readonly tools?: {
    readonly write?: boolean;
    readonly shell?: boolean;
    readonly shellTimeoutMs?: number;
    readonly shellNetwork?: boolean;
    /** Run `run_shell` without the bubblewrap sandbox: the only way to offer it where bwrap cannot work. */
    readonly shellUnsandboxed?: boolean;
    /** Extra folders or files a sandboxed command may read (relative to the config file's folder). */
    readonly shellReadOnly?: string[];
  };
  readonly persona?: string;
  readonly personaVars?: Record<string, string>;
  readonly maxSteps?: number;
  readonly limits?: {
    readonly maxConcurrentRuns?: number;
    readonly maxRunsPerConnection?: number;
    readonly maxQueued?: number;
    /** Cap on one run's output and on its event stream; at most MAX_TEXT_BYTES (protocol/output-cap.ts). */
    readonly maxOutputBytes?: number;
    /** Bytes one connection may send before its initialize is accepted (default 64 KiB). */
    readonly preAuthBytes?: number;
    /** Bytes all connections not yet initialized may make the daemon hold together (default 4 MiB). */
    readonly preAuthTotalBytes?: number;
    /** Cap on one stdin line of the MCP and ACP faces (default 4 MiB); longer lines get -32600. */
    readonly faceLineBytes?: number;
    /** Tokens a lineage (a root run and its descendants) may use; the step that crosses it is its last. */
    readonly lineageTokens?: number;
    /** Tokens one client (by its `initialize` name) may use per UTC day; a start beyond it is refused. */
    readonly clientTokensPerDay?: number;
    /** How long a start's idempotency key answers for its run (default 10 minutes). */
    readonly idempotencyWindowMs?: number;
  };
  /**
   * Explicit limits per model endpoint, keyed by base URL (`*`: any endpoint not named); every
   * child's requests to one endpoint share them (daemon/upstream/).
   */
  readonly endpoints?: Readonly<Record<string, EndpointLimits>>;
  /** Days a session log is kept after its last write (default 14). */
  readonly sessionRetentionDays?: number;
  /** Unix-socket connections served at once (default 1024). */
  readonly maxConnections?: number;
  /** Bytes written to a client and not yet read by it past which it is disconnected (default 16 MiB). */
  readonly maxUnsentBytes?: number;
  /**
   * Optional loopback TCP listener; clients present the token kept in `tokenFile` (0600) within
   * `authTimeoutMs` (default 5 s); at most `maxConnections` TCP clients at once (default 64).
   */
  readonly tcp?: {
    readonly host?: string;
    readonly port: number;
    readonly tokenFile: string;
    readonly maxConnections?: number;
    readonly authTimeoutMs?: number;
  };
  /**
   * Join a pool of daemons on a NATS JetStream server (docs/cluster.md): `nats` is its URL,
   * `ackWaitMs` the lease after which a silent member's runs move (default 15 s), `slots` the runs
   * this member executes at once (default limits.maxConcurrentRuns, which is cluster-wide),
   * `prefix` the pool's stream and bucket names (default `subagentd`), `workspaces` the roots of
   * the workspaces this member serves (default: any cwd that exists here), `workspaceWaitMs` how
   * long a start waits for a live member serving its workspace (default 10 s).
   */
  readonly cluster?: {
    readonly nats: string;
    readonly ackWaitMs?: number;
    readonly slots?: number;
    readonly prefix?: string;
    readonly workspaces?: readonly string[];
    readonly workspaceWaitMs?: number;
  };
  /** Stored runs and session logs kept, by age in days and by count (defaults in store/run-retention.ts). */
  readonly retention?: {
    readonly runs?: { readonly maxAgeDays?: number; readonly maxCount?: number };
    readonly sessions?: { readonly maxAgeDays?: number; readonly maxCount?: number };
  };
  /** How long a disconnected client's runs wait to be re-attached before they are cancelled (default 60 s). */
  readonly detachGraceMs?: number;
  /** Exit after this long with no connection and no live run (off by default). */
  readonly idleTimeoutMs?: number;
  /** How long the event loop keeps polling after hearing from or answering a client, in µs (default 250; 0 turns it off). */
  readonly pollSpinMicros?: number;
  /**
   * Nested delegation, per in-process provider (`spawn`, `fork`): its children get the `subagent`
   * tool for these providers, capped at `maxDepth` (default 3). Off when absent.
   */
  readonly delegation?: Readonly<Record<string, { readonly providers: string[]; readonly maxDepth?: number }>>;
  readonly worktrees?: {
    readonly dir?: string;
    readonly commit?: boolean;
    readonly cleanup?: 'auto' | 'keep' | 'always';
    readonly providers?: Readonly<Record<string, 'none' | 'worktree'>>;
  };
  /**
   * Prometheus metrics at `http://ADDRESS/metrics` (docs/observability.md); `address` is
   * `HOST:PORT` or `PORT` (host 127.0.0.1). A non-loopback host needs `allowRemote`. Off when absent.
   */
  readonly metrics?: { readonly address: string; readonly allowRemote?: boolean };
  /**
   * OpenTelemetry traces over OTLP/HTTP (docs/observability.md). The standard `OTEL_*` variables
   * turn them on too, and win over these. Off when absent.
   */
  readonly tracing?: { readonly endpoint: string; readonly protocol?: 'http/protobuf' | 'http/json'; readonly serviceName?: string };
}

const positiveInt = { type: 'integer', minimum: 1 };
const stringMap = { type: 'object', additionalProperties: { type: 'string' } };
const retentionLimits = {
  type: 'object',
  additionalProperties: false,
  properties: { maxAgeDays: { type: 'number', exclusiveMinimum: 0 }, maxCount: positiveInt },
};

const schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string' },
    socket: { type: 'string', minLength: 1 },
    stateDir: { type: 'string', minLength: 1 },
    maxFrameBytes: { type: 'integer', minimum: 1024, maximum: 1024 * 1024 * 1024 },
    maxConnections: positiveInt,
    maxUnsentBytes: { type: 'integer', minimum: 64 * 1024, maximum: 1024 * 1024 * 1024 },
    requireToken: { type: 'boolean' },
    providerModules: { type: 'array', items: { type: 'string', minLength: 1 } },
    providers: { type: 'array', items: ACP_PROVIDER_ENTRY_SCHEMA },
    model: {
      type: 'object',
      additionalProperties: false,
      properties: {
        default: { type: 'string', minLength: 1 },
        baseUrl: { type: 'string', minLength: 1 },
        apiKeyEnv: { type: 'string', minLength: 1 },
        idleTimeoutMs: positiveInt,
        stepTimeoutMs: positiveInt,
        maxRetries: { type: 'integer', minimum: 0, maximum: 10 },
      },
    },
    tools: {
      type: 'object',
      additionalProperties: false,
      properties: {
        write: { type: 'boolean' },
        shell: { type: 'boolean' },
        shellTimeoutMs: positiveInt,
        shellNetwork: { type: 'boolean' },
        shellUnsandboxed: { type: 'boolean' },
        shellReadOnly: { type: 'array', maxItems: 256, items: { type: 'string', minLength: 1 } },
      },
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxConcurrentRuns: positiveInt,
        maxRunsPerConnection: positiveInt,
        maxQueued: { type: 'integer', minimum: 0 },
        // Below the client's text-block cap, so a capped answer always validates there.
        maxOutputBytes: { type: 'integer', minimum: 1024, maximum: MAX_TEXT_BYTES },
        faceLineBytes: { type: 'integer', minimum: 1024, maximum: 1024 * 1024 * 1024 },
        preAuthBytes: { type: 'integer', minimum: 1024, maximum: 1024 * 1024 * 1024 },
        preAuthTotalBytes: { type: 'integer', minimum: 1024, maximum: 1024 * 1024 * 1024 },
        lineageTokens: positiveInt,
        clientTokensPerDay: positiveInt,
        idempotencyWindowMs: { type: 'integer', minimum: 1000, maximum: 7 * 24 * 3600 * 1000 },
      },
    },
    persona: { type: 'string' },
    personaVars: stringMap,
    maxSteps: positiveInt,
    idleTimeoutMs: positiveInt,
    detachGraceMs: { type: 'integer', minimum: 0 },
    pollSpinMicros: { type: 'integer', minimum: 0, maximum: 10_000 },
    delegation: {
      type: 'object',
      propertyNames: { enum: ['spawn', 'fork'] },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['providers'],
        properties: {
          providers: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1 } },
          maxDepth: { type: 'integer', minimum: 0 },
        },
      },
    },
    worktrees: {
      type: 'object',
      additionalProperties: false,
      properties: {
        dir: { type: 'string', pattern: '^/' },
        commit: { type: 'boolean' },
        cleanup: { enum: ['auto', 'keep', 'always'] },
        providers: { type: 'object', additionalProperties: { enum: ['none', 'worktree'] } },
      },
    },
    metrics: {
      type: 'object',
      additionalProperties: false,
      required: ['address'],
      properties: { address: { type: 'string', pattern: '^(\\[[0-9A-Fa-f:.]+\\]:|[^:\\s]+:)?[0-9]{1,5}$' }, allowRemote: { type: 'boolean' } },
    },
    tracing: {
      type: 'object',
      additionalProperties: false,
      required: ['endpoint'],
      properties: {
        endpoint: { type: 'string', pattern: '^https?://' },
        protocol: { enum: ['http/protobuf', 'http/json'] },
        serviceName: { type: 'string', minLength: 1, maxLength: 256 },
      },
    },
    sessionRetentionDays: { type: 'number', exclusiveMinimum: 0 },
    endpoints: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: { maxConcurrent: positiveInt, requestsPerMinute: positiveInt, tokensPerMinute: positiveInt, firstByteTimeoutMs: positiveInt },
      },
    },
    retention: {
      type: 'object',
      additionalProperties: false,
      properties: { runs: retentionLimits, sessions: retentionLimits },
    },
    cluster: {
      type: 'object',
      additionalProperties: false,
      required: ['nats'],
      properties: {
        nats: { type: 'string', pattern: '^(nats|tls)://' },
        ackWaitMs: { type: 'integer', minimum: 100, maximum: 3_600_000 },
        slots: { type: 'integer', minimum: 0 },
        prefix: { type: 'string', pattern: '^[A-Za-z0-9_-]+$' },
        workspaces: { type: 'array', items: { type: 'string', pattern: '^/' }, maxItems: 1024 },
        workspaceWaitMs: { type: 'integer', minimum: 100, maximum: 3_600_000 },
      },
    },
    tcp: {
      type: 'object',
      additionalProperties: false,
      required: ['port', 'tokenFile'],
      properties: {
        host: { type: 'string' },
        port: { type: 'integer', minimum: 0, maximum: 65535 },
        tokenFile: { type: 'string', minLength: 1 },
        maxConnections: positiveInt,
        authTimeoutMs: positiveInt,
      },
    },
  },
};

/** The config file's JSON Schema; test/schema-meta.spec.ts checks it against the meta-schema. */
export const CONFIG_SCHEMA: object = schema;

/**
 * No meta-schema check at run time (it compiles the whole draft-07 meta-schema, tens of ms): the
 * schema is ours and fixed, and the test above checks it once.
 */
export const CONFIG_AJV_OPTIONS = { allErrors: true, strict: false, validateSchema: false } as const;

/** The build's ahead-of-time validator, beside this module in dist/ (scripts/config-validator.ts). */
export const CONFIG_VALIDATOR_FILE = 'config-validator.cjs';

// Made on the first config read: a daemon or command without a config file never pays for it, and
// with the build's validator Ajv itself never loads.
let compiled: ValidateFunction<DaemonConfig> | undefined;
const validator = (): ValidateFunction<DaemonConfig> => (compiled ??= prebuilt() ?? newAjv(CONFIG_AJV_OPTIONS).compile<DaemonConfig>(schema));

/** The build's validator when it was made from this very schema; else none (sources, stale dist). */
function prebuilt(): ValidateFunction<DaemonConfig> | undefined {
  let made: (ValidateFunction<DaemonConfig> & { schemaText?: string }) | undefined;
  try {
    made = createRequire(import.meta.url)(`./${CONFIG_VALIDATOR_FILE}`) as ValidateFunction<DaemonConfig> & { schemaText?: string };
  } catch {
    return undefined;
  }
  return made.schemaText === JSON.stringify(schema) ? made : undefined;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Reads and validates a config file; relative paths in it are resolved against its folder. */
export function loadConfig(path: string): DaemonConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  return parseConfig(value, path);
}

export function parseConfig(value: unknown, origin = 'config'): DaemonConfig {
  const validate = validator();
  if (!validate(value)) {
    throw new ConfigError(`invalid config ${origin}: ${describeAjvErrors(validate.errors, { unknownKey: 'is not a known setting' })}`);
  }
  const base = dirname(resolve(origin));
  const abs = (p: string): string => (isAbsolute(p) ? p : resolve(base, p));
  return {
    ...value,
    ...(value.providerModules && { providerModules: value.providerModules.map(abs) }),
    ...(value.stateDir && { stateDir: abs(value.stateDir) }),
    ...(value.socket && { socket: abs(value.socket) }),
    ...(value.tcp && { tcp: { ...value.tcp, tokenFile: abs(value.tcp.tokenFile) } }),
    ...(value.tools?.shellReadOnly && { tools: { ...value.tools, shellReadOnly: value.tools.shellReadOnly.map(abs) } }),
  };
}
