/**
 * `subagentd acp`: pooled children as an ACP agent, for editors. A session is one child of one
 * provider: `session/new` records it, its first `session/prompt` starts the child, every later
 * prompt resumes it (the seam's one-shot `resume`; continuable children are not in main yet),
 * and `session/cancel` cancels the running turn. `session/load` re-attaches to the child by the
 * stored run token, after the editor, this face or the daemon restarted, and replays its log.
 * Permission prompts of a child go to the editor as `session/request_permission`; when the
 * editor offers `fs/*`, the child also gets tools that read and write through it.
 * Failures: an unknown session is `resourceNotFound`; a second prompt while one runs is
 * `invalidRequest`; a run that failed answers the prompt with an internal error carrying its
 * diagnostic (ACP has no failed stop reason). Imports client/ and protocol/ only.
 */
import { isAbsolute } from 'node:path';
import * as acp from '@agentclientprotocol/sdk';
import { SubagentError, metaTraceparent, type ClientTool, type PermissionHandler, type RemoteSubagentRun, type RemoteSubagentService } from '../../client/index.js';
import type { RunEvent, SessionEvent } from '../../protocol/index.js';
import { editorFsTools, type EditorFs } from './editor-fs-tools.js';
import { SessionStore, type StoredSession } from './session-store.js';
import { promptContent, stopReasonOf, updatesForEvent, updatesForRunEvent } from './session-updates.js';

export interface AcpFaceOptions {
  readonly service: RemoteSubagentService;
  readonly provider: string;
  readonly model?: string;
  /** `worktree`: each session's child works in its own git worktree and branch, not in the editor's files. */
  readonly isolation?: 'none' | 'worktree';
  readonly store: SessionStore;
  readonly version: string;
  /**
   * The run's stored session log when `run/inspect` does not carry it (a previous daemon's run):
   * the CLI asks the daemon (`daemon/session`).
   */
  readonly readLog?: (runId: string) => Promise<readonly SessionEvent[] | undefined>;
}

interface LiveSession {
  stored: StoredSession;
  run: RemoteSubagentRun | undefined;
  turn: AbortController | undefined;
  /** Notifications to the editor not yet written: a prompt answers only after its updates. */
  pending: Promise<void>;
  readonly onEvent: (event: RunEvent) => void;
}

export interface AcpFace {
  /** Serves one editor on `stream`; resolves when it closes. */
  serve(stream: acp.Stream): Promise<void>;
  /** The client's permission handler: relays a child's prompt to the editor of its session. */
  readonly onPermission: PermissionHandler;
}

/** Refuses at the door: a face whose provider the daemon lacks would fail every prompt. */
export function createAcpFace(options: AcpFaceOptions): AcpFace {
  const { service, store } = options;
  if (!service.getProvider(options.provider)) {
    throw new SubagentError('NO_PROVIDER', `no provider named '${options.provider}' (available: ${service.list().join(', ')})`);
  }
  const sessions = new Map<string, LiveSession>();
  let editor: acp.AgentContext | undefined;
  let editorFs: EditorFs | undefined;
  let permissionIds = 0;

  const notify = (live: LiveSession, update: acp.SessionUpdate): void => {
    const target = editor;
    if (!target) return;
    live.pending = live.pending.then(() =>
      target.notify(acp.methods.client.session.update, { sessionId: live.stored.sessionId, update }).catch(() => undefined),
    );
  };

  const open = (stored: StoredSession): LiveSession => {
    const live: LiveSession = {
      stored,
      run: undefined,
      turn: undefined,
      pending: Promise.resolve(),
      onEvent: (event) => {
        for (const update of updatesForRunEvent(event)) notify(live, update);
      },
    };
    sessions.set(stored.sessionId, live);
    return live;
  };

  const remember = (live: LiveSession, run: RemoteSubagentRun): void => {
    live.run = run;
    live.stored = { ...live.stored, runId: run.id, runToken: run.runToken };
    store.write(live.stored);
  };

  const startTurn = async (
    live: LiveSession,
    prompt: ReturnType<typeof promptContent>,
    signal: AbortSignal,
    traceparent: string | undefined,
  ): Promise<RemoteSubagentRun> => {
    // Each prompt continues the editor's trace: the first starts the session's child, a later one resumes it.
    if (live.run?.resume) return live.run.resume(prompt, { signal, ...(traceparent !== undefined && { traceparent }) });
    if (live.run) throw acp.RequestError.invalidRequest(undefined, `provider '${live.stored.provider}' cannot continue a child`);
    const start = (tools: ClientTool[]) =>
      service.start(live.stored.provider, {
        prompt,
        ...(tools.length > 0 && { tools }),
        parent: { sessionId: live.stored.sessionId, cwd: live.stored.cwd },
        signal,
        onEvent: live.onEvent,
        ...(options.model !== undefined && { agentOptions: { model: options.model } }),
        ...(options.isolation !== undefined && { isolation: options.isolation }),
        ...(traceparent !== undefined && { traceparent }),
      }) as Promise<RemoteSubagentRun>;
    // The editor's fs would write the editor's own checkout: an isolated child keeps to its worktree.
    const tools = options.isolation === 'worktree' ? [] : editorFsTools(editorFs, () => editor, live.stored.sessionId, live.stored.cwd);
    try {
      return await start(tools);
    } catch (error) {
      // A provider that cannot host client tools (an external ACP agent) works without the editor's fs.
      if (tools.length === 0 || !(error instanceof SubagentError && error.code === 'UNSUPPORTED_CAPABILITY')) throw error;
      return start([]);
    }
  };

  const app = acp
    .agent({ name: 'subagentd' })
    .onRequest(acp.methods.agent.initialize, ({ params }) => {
      editorFs = params.clientCapabilities?.fs;
      return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        mcpCapabilities: { http: false, sse: false },
      },
      agentInfo: { name: 'subagentd', version: options.version },
      authMethods: [],
      };
    })
    .onRequest(acp.methods.agent.session.new, ({ params }) => {
      // Children resolve paths against it: a relative cwd would mean the face's own directory.
      if (!isAbsolute(params.cwd)) throw acp.RequestError.invalidParams({ cwd: params.cwd }, `cwd must be an absolute path, not '${params.cwd}'`);
      const stored: StoredSession = { sessionId: SessionStore.newId(), cwd: params.cwd, provider: options.provider };
      store.write(stored);
      open(stored);
      return { sessionId: stored.sessionId };
    })
    .onRequest(acp.methods.agent.session.load, async ({ params }) => {
      let live = sessions.get(params.sessionId);
      if (!live) {
        const stored = store.read(params.sessionId);
        if (!stored) throw acp.RequestError.resourceNotFound(params.sessionId);
        live = open(stored);
      }
      const { runId, runToken } = live.stored;
      if (runId === undefined || runToken === undefined) return {};
      if (!live.run) {
        try {
          live.run = await service.adopt(runId, runToken, { onEvent: live.onEvent });
        } catch (error) {
          sessions.delete(params.sessionId);
          throw acp.RequestError.internalError({ code: (error as SubagentError).code }, `cannot re-attach the child: ${(error as Error).message}`);
        }
      }
      const inspected = await service.ops.inspect(runId, runToken);
      const events = inspected.events ?? (await options.readLog?.(runId)) ?? [];
      for (const event of events) for (const update of updatesForEvent(event, true)) notify(live, update);
      await live.pending;
      return {};
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, signal }) => {
      const live = sessions.get(params.sessionId);
      if (!live) throw acp.RequestError.resourceNotFound(params.sessionId);
      if (live.turn) throw acp.RequestError.invalidRequest(undefined, 'a prompt is already running in this session');
      const turn = new AbortController();
      live.turn = turn;
      const onAbort = (): void => turn.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        let run: RemoteSubagentRun;
        try {
          run = await startTurn(live, promptContent(params.prompt), turn.signal, metaTraceparent(params._meta));
        } catch (error) {
          if (error instanceof SubagentError && error.code === 'ABORTED') return { stopReason: 'cancelled' as const };
          if (error instanceof acp.RequestError) throw error;
          throw acp.RequestError.internalError({ code: (error as SubagentError).code }, (error as Error).message);
        }
        remember(live, run);
        const result = await run.result;
        await live.pending;
        const stopReason = stopReasonOf(result);
        if (stopReason) return { stopReason };
        throw acp.RequestError.internalError(
          { stopReason: result.stopReason, diagnostic: result.diagnostic },
          `the child's turn ended with "${result.stopReason}"${result.diagnostic ? `: ${result.diagnostic}` : ''}`,
        );
      } finally {
        signal.removeEventListener('abort', onAbort);
        live.turn = undefined;
      }
    })
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      sessions.get(params.sessionId)?.turn?.abort();
    });

  return {
    async serve(stream) {
      const connection = app.connect(stream);
      editor = connection.client;
      await connection.closed;
      editor = undefined;
    },
    async onPermission(request, { signal }) {
      const live = [...sessions.values()].find((s) => s.run?.id === request.runId);
      const target = editor;
      if (!live || !target) return { outcome: 'cancelled' };
      await live.pending;
      const answer: acp.RequestPermissionResponse = await target.request(
        acp.methods.client.session.requestPermission,
        {
          sessionId: live.stored.sessionId,
          toolCall: { toolCallId: `permission-${++permissionIds}`, title: request.title },
          options: request.options.map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind })),
        },
        { cancellationSignal: signal },
      );
      return answer.outcome.outcome === 'selected' ? { outcome: 'selected', optionId: answer.outcome.optionId } : { outcome: 'cancelled' };
    },
  };
}
