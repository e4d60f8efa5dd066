/**
 * Drives the built faces inside a CliSandbox (its own socket and state dir, the daemon
 * auto-started by the face): `subagentd mcp` with the MCP SDK's own client, `subagentd acp` with
 * the ACP SDK's client side, both over stdio. `close()` ends the face process; the sandbox's
 * cleanup ends the daemon.
 */
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { connect, type RemoteSubagentService } from '../../client/index.js';
import type { RunInfo } from '../../protocol/index.js';
import { cleanEnv, MAIN, waitUntil, type CliProcess, type CliSandbox } from './cli-harness.js';

export interface McpFace {
  readonly client: Client;
  readonly stderr: () => string;
  /**
   * Every message the face sent, in wire order, recorded as the transport reads it (before the
   * SDK dispatches it). The SDK's `onprogress` is no record of what was sent: its Client runs a
   * notification's handler a microtask later but a response's at once, so progress read in the
   * same chunk as its call's result is dropped as "unknown token" (typescript-sdk#2580), which a
   * busy host (or test worker) meets whenever the face's last lines pile up in the pipe.
   */
  readonly received: () => readonly JSONRPCMessage[];
  /** Stops reading the face's stdout until the returned function is called: what it writes meanwhile piles up in the pipe. */
  holdOutput(): () => void;
  close(): Promise<void>;
}

export async function openMcpFace(box: CliSandbox, args: readonly string[], env: Record<string, string> = {}): Promise<McpFace> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MAIN, 'mcp', ...box.flags, ...args],
    cwd: box.work,
    env: cleanEnv(env) as Record<string, string>,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'face-test', version: '1' });
  await client.connect(transport);
  const received: JSONRPCMessage[] = [];
  const dispatch = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    received.push(message);
    dispatch?.(message);
  };
  // The SDK keeps the face's process private; its stdout is what a slow host would not be reading.
  const stdout = (transport as unknown as { _process?: { stdout?: Readable | null } })._process?.stdout;
  const holdOutput = (): (() => void) => {
    if (!stdout) throw new Error('the MCP face has no stdout to hold');
    stdout.pause();
    return () => void stdout.resume();
  };
  return { client, stderr: () => stderr, received: () => received, holdOutput, close: () => client.close() };
}

/** An ops connection to the sandbox's daemon, to read runs as the daemon records them. */
export function daemonOps(box: CliSandbox): Promise<RemoteSubagentService> {
  return connect({ socket: box.socket, logger: { error: () => undefined } });
}

/** Waits until some run of `provider` satisfies `check` in `runs/list`. */
export async function waitForRun(ops: RemoteSubagentService, check: (run: RunInfo) => boolean, what: string): Promise<RunInfo> {
  let found: RunInfo | undefined;
  await waitUntil(
    async () => {
      found = (await ops.ops.runs()).find(check);
      return found !== undefined;
    },
    15_000,
    what,
  );
  return found as RunInfo;
}

/** `subagentd acp` driven by the ACP SDK's client side: what the editor received, and its answers. */
export interface AcpFaceClient {
  readonly agent: acp.ClientContext;
  /** Every `session/update` received, in order. */
  readonly updates: acp.SessionNotification[];
  /** Every `session/request_permission` received, in order. */
  readonly permissionRequests: acp.RequestPermissionRequest[];
  /** `fs/*` requests received, in order; reads are answered from `files`. */
  readonly fsRequests: Array<{ method: string; params: { path: string; content?: string } }>;
  /** The editor's buffers by absolute path. */
  readonly files: Map<string, string>;
  /** How the editor answers a permission request (default: the first option). */
  answerPermission: (request: acp.RequestPermissionRequest) => acp.RequestPermissionResponse;
  /** The text of the agent message chunks of one session since `from` (an index into `updates`). */
  agentText(sessionId: string, from?: number): string;
  readonly process: CliProcess;
  close(): Promise<void>;
}

export function openAcpFace(box: CliSandbox, args: readonly string[], env?: Record<string, string>): AcpFaceClient {
  const proc = box.spawn(['acp', ...args], { timeoutMs: 120_000, ...(env && { env }) });
  const updates: acp.SessionNotification[] = [];
  const permissionRequests: acp.RequestPermissionRequest[] = [];
  const fsRequests: AcpFaceClient['fsRequests'] = [];
  const files = new Map<string, string>();
  const face: AcpFaceClient = {
    fsRequests,
    files,
    agent: undefined as unknown as acp.ClientContext,
    updates,
    permissionRequests,
    answerPermission: (request) => ({ outcome: { outcome: 'selected', optionId: request.options[0]!.optionId } }),
    agentText(sessionId, from = 0) {
      return updates
        .slice(from)
        .filter((n) => n.sessionId === sessionId && n.update.sessionUpdate === 'agent_message_chunk')
        .map((n) => ((n.update as { content: { type: string; text?: string } }).content.text ?? ''))
        .join('');
    },
    process: proc,
    async close() {
      connection.close();
      proc.child.stdin.end();
      await proc.exited;
    },
  };
  const app = acp
    .client({ name: 'face-test' })
    .onNotification(acp.methods.client.session.update, ({ params }) => void updates.push(params))
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissionRequests.push(params);
      return face.answerPermission(params);
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      fsRequests.push({ method: 'fs/read_text_file', params });
      const content = files.get(params.path);
      if (content === undefined) throw acp.RequestError.resourceNotFound(params.path);
      return { content };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      fsRequests.push({ method: 'fs/write_text_file', params });
      files.set(params.path, params.content);
      return {};
    });
  const connection = app.connect(
    acp.ndJsonStream(Writable.toWeb(proc.child.stdin) as WritableStream<Uint8Array>, Readable.toWeb(proc.child.stdout) as ReadableStream<Uint8Array>),
  );
  (face as { agent: acp.ClientContext }).agent = connection.agent;
  return face;
}
