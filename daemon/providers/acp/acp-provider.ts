/**
 * The `acp` provider: every run is an external ACP agent process (one per start, shared by
 * its resume chain), spoken to over stdio with the ACP SDK's client side. With `warm: N` the
 * process comes from a pool of pre-initialized ones (warm-pool.ts) when one is ready.
 */
import type { Logger } from 'pino';
import { SubagentError } from '../../../protocol/index.js';
import type { DaemonProvider, ProviderStartRequest } from '../../provider.js';
import type { AcpRun } from './acp-run.js';
import type { AcpSession } from './acp-session.js';
import type { AgentGroups } from './agent-groups.js';
import type { SessionBinding } from './client-requests.js';
import { resolveAcpConfig, type AcpProviderConfig } from './config.js';
import { compileStructuredOutput } from './structured-output.js';
import { WarmPool } from './warm-pool.js';

/**
 * The ACP SDK (and the zod it brings) is loaded by the first start, not at daemon start: a daemon
 * with ACP providers configured but unused pays nothing for them. A provider with `warm` > 0
 * loads it at creation, to warm its pool.
 */
let runtime: Promise<{ AcpSession: typeof import('./acp-session.js').AcpSession; AcpRun: typeof import('./acp-run.js').AcpRun }> | undefined;
const loadAcpRuntime = () =>
  (runtime ??= Promise.all([import('./acp-session.js'), import('./acp-run.js')]).then(([session, run]) => ({
    AcpSession: session.AcpSession,
    AcpRun: run.AcpRun,
  })));

export interface AcpProviderDeps {
  readonly log: Logger;
  /** Records each agent's process group so a later daemon can reap it (see agent-groups.ts). */
  readonly groups?: AgentGroups;
}

export function createAcpProvider(config: AcpProviderConfig, deps: AcpProviderDeps): DaemonProvider {
  const resolved = resolveAcpConfig(config);
  const poolLog = deps.log.child({ provider: resolved.name, pool: 'warm' });
  const pool = new WarmPool(
    resolved,
    async (signal) => (await loadAcpRuntime()).AcpSession.warm(resolved, signal, poolLog, deps.groups),
    poolLog,
  );
  pool.fill();

  /** A warm process when one is ready (and the request brings no env of its own), else a cold one. */
  async function takeOrSpawn(request: ProviderStartRequest, binding: SessionBinding, log: Logger): Promise<AcpSession> {
    const { AcpSession } = await loadAcpRuntime();
    // A warm process was spawned without this request's env: such a start spawns its own.
    const warm = request.env && Object.keys(request.env).length > 0 ? undefined : pool.take();
    if (warm) {
      try {
        await warm.adopt(request, binding, log);
      } catch (error) {
        await pool.ended(warm);
        throw error;
      }
      return warm;
    }
    pool.admitCold();
    let cold: AcpSession | undefined;
    try {
      cold = await AcpSession.open(resolved, request, binding, log, deps.groups);
      return cold;
    } finally {
      pool.coldStarted(cold);
    }
  }

  return {
    name: resolved.name,
    capabilities: {
      // Asked for in the prompt, then parsed and validated here: see structured-output.ts.
      outputSchema: true,
      // The service computes and caps depth; an ACP child cannot delegate back through us.
      depthLimit: true,
      // An external agent cannot be made to honour a tool filter or a persona.
      toolFilter: false,
      persona: false,
    },
    inheritsParentContext: false,
    runtime: { sendMessage: false, resume: true },
    async start(request: ProviderStartRequest): Promise<AcpRun> {
      if (request.tools && request.tools.length > 0) {
        throw new SubagentError(
          'UNSUPPORTED_CAPABILITY',
          `provider "${resolved.name}" cannot offer client-hosted tools to an external ACP agent`,
        );
      }
      // Compiled before spawning: a schema ajv rejects costs no process.
      const structured = request.outputSchema ? compileStructuredOutput(request.outputSchema) : undefined;
      const log = deps.log.child({ provider: resolved.name, runId: request.host.runId });
      const { AcpSession, AcpRun } = await loadAcpRuntime();
      const binding = await AcpSession.bindingFor(resolved, request);
      if (request.signal.aborted) throw new SubagentError('ABORTED', 'start was cancelled before the agent was spawned');
      const session = await takeOrSpawn(request, binding, log).finally(() => pool.fill());
      return AcpRun.begin(session, request.prompt, request.signal, structured, resolved.initializeTimeoutMs, (s) => pool.ended(s));
    },
    processes: () => pool.status(),
    close: () => pool.close(),
  };
}
