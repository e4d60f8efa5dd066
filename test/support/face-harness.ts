/**
 * Drives the built `subagentd mcp` with the MCP SDK's own client over stdio, inside a CliSandbox
 * (its own socket and state dir, the daemon auto-started by the face). `close()` ends the face
 * process; the sandbox's cleanup ends the daemon.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { connect, type RemoteSubagentService } from '../../client/index.js';
import type { RunInfo } from '../../protocol/index.js';
import { cleanEnv, MAIN, waitUntil, type CliSandbox } from './cli-harness.js';

export interface McpFace {
  readonly client: Client;
  readonly stderr: () => string;
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
  return { client, stderr: () => stderr, close: () => client.close() };
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
