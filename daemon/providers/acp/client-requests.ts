/**
 * The requests an agent makes of its client, answered for the session it is bound to: permission
 * by policy (or by asking the owning client), and files rooted at the parent's cwd. A warm agent
 * process is connected before any run exists, so the run's side (its host, workspace and file
 * access) is read from the current binding at each request; with none bound, or for another
 * session id, the answer is session-not-found. Methods not registered here — terminal/*,
 * elicitation, anything unknown, fs/* not offered — get the SDK's method-not-found answer,
 * matching the capabilities sent at initialize.
 */
import * as acp from '@agentclientprotocol/sdk';
import type { Logger } from 'pino';
import type { RunHost } from '../../provider.js';
import type { ResolvedAcpConfig } from './config.js';
import { allowOutcome, cancelledOutcome, denyOutcome, outsideWorkspace } from './permission-policy.js';
import type { Turn } from './turn.js';
import { WorkspaceError } from '../../workspace/workspace-error.js';
import type { WorkspaceFs } from './workspace-fs.js';

/** The run side of a session: set when a run takes the agent process. */
export interface SessionBinding {
  /** Present when the config offers file access (read or write). */
  readonly fs: WorkspaceFs | undefined;
  readonly host: RunHost;
  /** The parent's cwd: what `allow-in-workspace` confines approvals to. */
  readonly workspaceRoot: string;
}

export interface ClientRequestContext {
  readonly config: ResolvedAcpConfig;
  log(): Logger;
  binding(): SessionBinding | undefined;
  /** The ACP session id, once `session/new` has answered. */
  sessionId(): string | undefined;
  /** The turn the agent is working on (its prompt not yet answered), if any. */
  currentTurn(): Turn | undefined;
}

/** What one request is answered with: the context and the binding it was checked against. */
interface Bound extends SessionBinding {
  readonly ctx: ClientRequestContext;
}

export function buildClientApp(ctx: ClientRequestContext): acp.ClientApp {
  const app = acp.client({ name: 'subagentd' });
  app.onRequest(acp.methods.client.session.requestPermission, async ({ params, signal }) => {
    const bound = assertSession(ctx, params.sessionId);
    return { outcome: await answerPermission(bound, params, signal) };
  });
  if (ctx.config.fileAccess.read) {
    app.onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
      const fs = requireFs(assertSession(ctx, params.sessionId));
      try {
        return { content: await fs.readText(params.path, params.line, params.limit) };
      } catch (error) {
        throw toRequestError(error);
      }
    });
  }
  if (ctx.config.fileAccess.write) {
    app.onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
      const fs = requireFs(assertSession(ctx, params.sessionId));
      try {
        await fs.writeText(params.path, params.content);
        return {};
      } catch (error) {
        // A refused write is part of the run's truth: the result's diagnostic lists it.
        if (error instanceof WorkspaceError && error.kind !== 'not-found' && error.kind !== 'io') {
          ctx.currentTurn()?.noteDenial(`write ${JSON.stringify(params.path)} refused: ${error.message}`);
        }
        throw toRequestError(error);
      }
    });
  }
  return app;
}

function assertSession(ctx: ClientRequestContext, sessionId: string): Bound {
  const ours = ctx.sessionId();
  const binding = ctx.binding();
  if (ours === undefined || sessionId !== ours || binding === undefined) throw acp.RequestError.sessionNotFound(sessionId);
  return { ...binding, ctx };
}

function requireFs(bound: Bound): WorkspaceFs {
  // The config offers file access, so a bound session always has its workspace opened.
  if (!bound.fs) throw new acp.RequestError(-32603, 'file access is not open for this session');
  return bound.fs;
}

async function answerPermission(
  bound: Bound,
  params: acp.RequestPermissionRequest,
  requestSignal: AbortSignal,
): Promise<acp.RequestPermissionOutcome> {
  const { ctx } = bound;
  const turn = ctx.currentTurn();
  // A request outside a live turn (e.g. after a cancel) can only be answered `cancelled`.
  if (!turn || turn.settled) return cancelledOutcome();
  const what = describeToolCall(params.toolCall);
  switch (ctx.config.permission) {
    case 'allow':
      return allowOutcome(params.options);
    case 'allow-in-workspace': {
      const outside = outsideWorkspace(params.toolCall, bound.workspaceRoot);
      if (outside === undefined) return allowOutcome(params.options);
      turn.noteDenial(`${what} refused by permission 'allow-in-workspace': ${outside}`);
      return denyOutcome(params.options);
    }
    case 'deny':
      turn.noteDenial(`${what} refused by permission 'deny'`);
      return denyOutcome(params.options);
    case 'ask': {
      const outcome = await askHost(bound, params, AbortSignal.any([requestSignal, turn.cancelSignal]));
      if (!isAllowed(outcome, params.options) && !turn.settled) turn.noteDenial(`${what} not approved by the client`);
      return outcome;
    }
    default: {
      const unknownPolicy: never = ctx.config.permission;
      throw new Error(`unknown permission policy ${String(unknownPolicy)}`);
    }
  }
}

/** How a denial names the tool call: its title (or name) and kind. */
function describeToolCall(toolCall: acp.ToolCallUpdate): string {
  const title = toolCall.title ?? (toolCall as { name?: string }).name ?? toolCall.toolCallId;
  return `${JSON.stringify(title)}${toolCall.kind ? ` (${toolCall.kind})` : ''}`;
}

function isAllowed(outcome: acp.RequestPermissionOutcome, options: readonly acp.PermissionOption[]): boolean {
  if (outcome.outcome !== 'selected') return false;
  const kind = options.find((option) => option.optionId === outcome.optionId)?.kind;
  return kind === 'allow_once' || kind === 'allow_always';
}

/** Relay the question to the owning client; a cancel of the turn (or of the request) wins. */
async function askHost(
  bound: Bound,
  params: acp.RequestPermissionRequest,
  signal: AbortSignal,
): Promise<acp.RequestPermissionOutcome> {
  if (signal.aborted) return cancelledOutcome();
  const { toolCall } = params;
  const title = toolCall.title ?? toolCall.name ?? `tool call ${toolCall.toolCallId}`;
  const options = params.options.map(({ optionId, name, kind }) => ({ optionId, name, kind }));
  const aborted = new Promise<'aborted'>((resolve) => signal.addEventListener('abort', () => resolve('aborted'), { once: true }));
  try {
    const answer = await Promise.race([bound.host.askPermission({ title, options }, signal), aborted]);
    if (answer === 'aborted' || signal.aborted || answer.outcome === 'cancelled') return cancelledOutcome();
    if (params.options.some((option) => option.optionId === answer.optionId)) {
      return { outcome: 'selected', optionId: answer.optionId };
    }
    bound.ctx.log().warn({ optionId: answer.optionId }, 'permission answer names an option the agent did not offer; denying');
    return denyOutcome(params.options);
  } catch (error) {
    if (signal.aborted) return cancelledOutcome();
    bound.ctx.log().warn({ err: error }, 'permission prompt failed; denying');
    return denyOutcome(params.options);
  }
}

/** File errors as JSON-RPC errors: -32002 missing, -32602 refused, -32603 anything else. */
function toRequestError(error: unknown): unknown {
  if (!(error instanceof WorkspaceError)) return error;
  switch (error.kind) {
    case 'not-found':
      return new acp.RequestError(-32002, error.message);
    case 'io':
      return new acp.RequestError(-32603, error.message);
    case 'invalid-path':
    case 'outside-root':
    case 'not-a-file':
    case 'not-a-directory':
    case 'hard-linked':
    case 'too-large':
      return new acp.RequestError(-32602, error.message);
    default: {
      const unknownKind: never = error.kind;
      return new acp.RequestError(-32603, `unexpected file error ${String(unknownKind)}`);
    }
  }
}
