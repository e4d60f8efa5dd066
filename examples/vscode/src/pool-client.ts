/**
 * The extension's conversation with the daemon, free of the VS Code API so a test can drive it
 * over a plain vscode-jsonrpc connection to `subagentd connect`, exactly as vscode-languageclient
 * drives it inside VS Code. The language client sends its own LSP `initialize`; the daemon
 * accepts it and reads what is ours from `initializationOptions`.
 */

/** What both vscode-languageclient's `LanguageClient` and a vscode-jsonrpc connection offer. */
export interface PoolConnection {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
  onNotification(method: string, handler: (params: any) => void): { dispose(): void };
}

/** Passed as the language client's `initializationOptions`. The token is added by `subagentd connect`. */
export const INITIALIZATION_OPTIONS = { protocolVersion: '1.0.0' } as const;

export interface Delegation {
  readonly runId: string;
  readonly stopReason: string;
  readonly text: string;
}

interface EndParams {
  readonly runId: string;
  readonly stopReason: string;
  readonly lastAssistantMessage?: Array<{ type: string; text?: string }>;
}

/** Delegates one task to a `spawn` child working in `cwd`, and waits for its end. */
export async function delegate(connection: PoolConnection, task: string, cwd: string, model?: string): Promise<Delegation> {
  // The end may arrive before the start's reply is processed: keep every end until it is claimed.
  const ends = new Map<string, EndParams>();
  let claim: ((end: EndParams) => void) | undefined;
  let wanted: string | undefined;
  const subscription = connection.onNotification('subagent/end', (end: EndParams) => {
    if (end.runId === wanted && claim) claim(end);
    else ends.set(end.runId, end);
  });
  try {
    const started = await connection.sendRequest<{ runId: string }>('subagent/start', {
      provider: 'spawn',
      label: 'VS Code task',
      prompt: [{ type: 'text', text: task }],
      parent: { sessionId: `vscode-${Date.now()}`, cwd },
      ...(model ? { agentOptions: { model } } : {}),
    });
    wanted = started.runId;
    const end = ends.get(started.runId) ?? (await new Promise<EndParams>((resolve) => (claim = resolve)));
    await connection.sendRequest('run/dispose', { runId: started.runId });
    const text = (end.lastAssistantMessage ?? []).map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('');
    return { runId: started.runId, stopReason: end.stopReason, text };
  } finally {
    subscription.dispose();
  }
}
