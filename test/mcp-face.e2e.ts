/**
 * `subagentd mcp` driven by the MCP SDK's own `Client` over stdio, as an MCP host would: the
 * tool list and its wording, a completed call, a failed run as an `isError` result, progress for
 * a call with a progress token, the host's abort cancelling the run, and bad input.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { RemoteSubagentService } from '../client/index.js';
import { CliSandbox, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';
import { daemonOps, openMcpFace, waitForRun, type McpFace } from './support/face-harness.js';

let box: CliSandbox;
let ops: RemoteSubagentService | undefined;
const faces: McpFace[] = [];

/** A face whose children all replay `steps`. */
async function face(name: string, steps: unknown[], extra: string[] = []): Promise<McpFace> {
  const opened = await openMcpFace(box, ['--model', `scripted:${box.file(`${name}.json`, { steps })}`, ...extra]);
  faces.push(opened);
  return opened;
}

const textOf = (result: CallToolResult): string => result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

beforeAll(() => {
  box = new CliSandbox('subagentd-mcp-');
});
afterAll(async () => {
  for (const f of faces) await f.close().catch(() => undefined);
  await ops?.close();
  await box.cleanup();
});

it('lists one subagent tool per provider with the seam wording, and answers a call with the child output and progress', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await face('ok', [
    { text: 'Looking.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
    { text: 'The sandbox holds a README.', finish: 'stop' },
  ], ['--provider', 'spawn', '--provider', 'fork']);

  const { tools } = await mcp.client.listTools();
  expect(tools.map((t) => t.name)).toEqual(['subagent', 'subagent_fork', 'job_output', 'job_kill']);
  const spawnTool = tools[0]!;
  expect(spawnTool.description).toContain('does not see this conversation');
  expect(JSON.stringify(spawnTool.inputSchema)).toContain('include everything it needs');
  expect(spawnTool.inputSchema.required).toEqual(['description', 'prompt']);
  const forkTool = tools[1]!;
  expect(forkTool.description).toContain('inherits this conversation');
  expect(forkTool.description).not.toContain('does not see this conversation');

  // The test stops reading at the first progress and resumes once the daemon has disposed the
  // run, so the rest of the progress and the result reach it in one read, as they reach a busy
  // host. What the face sent is read off the wire: the SDK's `onprogress` drops progress that
  // arrives in the same read as its result (see McpFace.received).
  ops ??= await daemonOps(box);
  let resume: (() => void) | undefined;
  const call = mcp.client.callTool(
    { name: 'subagent', arguments: { description: 'Look around', prompt: 'What is in the working directory?' } },
    undefined,
    { onprogress: () => void (resume ??= mcp.holdOutput()) },
  );
  await waitUntil(() => resume !== undefined, 30_000, 'the first progress');
  await waitForRun(ops, (r) => r.stopReason === 'completed' && r.state === 'disposed', 'the disposed run');
  resume!();
  const result = (await call) as CallToolResult;
  expect(result.isError).toBeFalsy();
  expect(textOf(result)).toBe('The sandbox holds a README.');
  const wire = mcp.received();
  const progress = wire.flatMap((m, at) =>
    'method' in m && m.method === 'notifications/progress' ? [{ at, ...(m.params as { progressToken: number; progress: number; message?: string }) }] : [],
  );
  const answer = wire.findIndex((m) => 'result' in m && m.id === progress[0]?.progressToken);
  // Every progress of the call went out before its result: a host would see none sent after it.
  expect(answer).toBeGreaterThan(0);
  expect(progress.every((p) => p.at < answer && p.progressToken === progress[0]!.progressToken)).toBe(true);
  const messages = progress.map((p) => p.message);
  expect(messages).toContain('calling list_directory');
  expect(messages).toContain('list_directory done');
  expect(messages.at(-1)).toBe('turn ended: completed');
  // MCP requires progress to increase with every notification.
  expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
});

it('reports a run that failed as an isError result with the headline, the diagnostic and the partial output', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await face('fails', [
    { text: 'Half of the answer.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
    { error: { kind: 'http', message: '502 from upstream', status: 502 } },
  ]);
  const result = (await mcp.client.callTool({ name: 'subagent', arguments: { description: 'Try it', prompt: 'Do the thing' } })) as CallToolResult;
  expect(result.isError).toBe(true);
  const text = textOf(result);
  expect(text.split('\n')[0]).toBe('subagent run failed');
  expect(text).toMatch(/\nDiagnostic: .*502 from upstream/);
  expect(text).toContain('\nPartial output before the run ended:\nHalf of the answer.');
});

it("cancels the run when the host aborts the call, leaving it 'aborted' in the daemon", { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await face('slow', [
    { text: 'Starting.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] },
    { delayMs: 60_000, text: 'never reached', finish: 'stop' },
  ]);
  const abort = new AbortController();
  const call = mcp.client.callTool({ name: 'subagent', arguments: { description: 'Slow job', prompt: 'Take your time' } }, undefined, {
    signal: abort.signal,
    onprogress: (p) => {
      if (p.message === 'list_directory done') abort.abort();
    },
  });
  await expect(call).rejects.toThrow(/abort/i);
  ops ??= await daemonOps(box);
  const run = await waitForRun(ops, (r) => r.stopReason === 'aborted', 'the aborted run');
  expect(['settled', 'disposed']).toContain(run.state);
});

it('refuses bad tool input with an MCP error naming the field, and keeps serving', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await face('bad-input', [{ text: 'fine', finish: 'stop' }]);
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ prompt: 'no description' }, 'description'],
    [{ description: 'no prompt' }, 'prompt'],
    [{ description: 'x', prompt: 42 }, 'prompt'],
    [{ description: 'x', prompt: 'y', run_in_background: 'yes' }, 'run_in_background'],
    [{ description: 'x', prompt: 'y', provider: 'fork' }, 'provider'],
  ];
  const jobCases: Array<[string, Record<string, unknown>, string]> = [
    ['job_output', {}, 'job_id'],
    ['job_kill', { job_id: 7 }, 'job_id'],
  ];
  for (const [args, field] of cases) {
    const error = await mcp.client.callTool({ name: 'subagent', arguments: args }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error, JSON.stringify(args)).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toContain(`"${field}"`);
  }
  for (const [tool, args, field] of jobCases) {
    const error = await mcp.client.callTool({ name: tool, arguments: args }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as McpError).code, `${tool} ${JSON.stringify(args)}`).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toContain(`"${field}"`);
  }
  const ok = (await mcp.client.callTool({ name: 'subagent', arguments: { description: 'x', prompt: 'y' } })) as CallToolResult;
  expect(textOf(ok)).toBe('fine');
});

it('runs a call in the background as a job whose output is read later', { timeout: HEAVY_TEST_MS }, async () => {
  const mcp = await face('background', [{ text: 'background answer', finish: 'stop' }]);
  const started = (await mcp.client.callTool({
    name: 'subagent',
    arguments: { description: 'Later', prompt: 'Work on it', run_in_background: true },
  })) as CallToolResult;
  expect(textOf(started)).toMatch(/^started background job subagent-1 \(Later\)/);
  const output = (await mcp.client.callTool({ name: 'job_output', arguments: { job_id: 'subagent-1', wait: true } })) as CallToolResult;
  expect(output.isError).toBeFalsy();
  expect(textOf(output)).toBe('background answer');
});
