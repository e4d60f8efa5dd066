/**
 * The MCP face carries its host's trace context: a `tools/call` with `_meta.traceparent` starts a
 * run whose `invoke_agent` span (exported by the auto-started daemon, tracing on through the
 * standard OTEL_* variables) is a child of the host's span; in continuable mode a `send_message`
 * call's context is that of the turn it wakes.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { CliSandbox, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';
import { waitFor } from './support/daemon-process.js';
import { openMcpFace, type McpFace } from './support/face-harness.js';
import { startOtlpReceiver, type OtlpReceiver } from './support/otlp-receiver.js';

let box: CliSandbox;
let face: McpFace | undefined;
let continuable: McpFace | undefined;
let receiver: OtlpReceiver;

beforeAll(async () => {
  box = new CliSandbox('subagentd-mcp-trace-');
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await face?.close().catch(() => undefined);
  await continuable?.close().catch(() => undefined);
  await box.cleanup();
  await receiver.close();
});

it('a tools/call with _meta.traceparent continues the host trace in the daemon', { timeout: HEAVY_TEST_MS }, async () => {
  face = await openMcpFace(box, ['--model', `scripted:${box.file('steps.json', { steps: [{ text: 'traced answer', finish: 'stop' }] })}`], {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  });
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const hostSpan = '00f067aa0ba902b7';
  const result = (await face.client.callTool({
    name: 'subagent',
    arguments: { description: 'Traced task', prompt: 'Answer.' },
    _meta: { traceparent: `00-${traceId}-${hostSpan}-01` },
  })) as CallToolResult;
  expect(result.isError).toBeFalsy();
  await waitFor(() => receiver.spans.some((s) => s.name.startsWith('invoke_agent')), 15_000, () => `an invoke_agent span; got ${receiver.spans.map((s) => s.name).join(', ')}`);
  const run = receiver.spans.find((s) => s.name.startsWith('invoke_agent'))!;
  expect(run.traceId).toBe(traceId);
  expect(run.parentSpanId).toBe(hostSpan);
});

it("a send_message with _meta.traceparent continues the host trace in the child's next turn", { timeout: HEAVY_TEST_MS }, async () => {
  const script = box.file('turns.json', { steps: [{ text: 'first turn' }, { text: 'second turn' }] });
  continuable = await openMcpFace(box, ['--background-mode', 'continuable', '--model', `scripted:${script}`], {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  });
  const call = async (name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<string> => {
    const result = (await continuable!.client.callTool({ name, arguments: args, ...(meta && { _meta: meta }) })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
  };
  const started = await call('subagent', { description: 'kept', prompt: 'Remember.' });
  const childId = /^started subagent (\S+)/.exec(started)?.[1];
  expect(childId, started).toBeDefined();
  await waitUntil(async () => (await call('list_agents', {})).includes(`${childId} idle`), 20_000, 'the first turn to settle');

  const traceId = '5bf92f3577b34da6a3ce929d0e0e4737';
  const hostSpan = '2222222222222222';
  await call('send_message', { subagent_id: childId, message: 'Again.' }, { traceparent: `00-${traceId}-${hostSpan}-01` });
  const turn = () => receiver.spans.find((s) => s.name.startsWith('invoke_agent') && s.traceId === traceId);
  await waitFor(() => turn() !== undefined, 15_000, () => `the second turn's invoke_agent span; got ${receiver.spans.map((s) => s.name).join(', ')}`);
  expect(turn()!.parentSpanId).toBe(hostSpan);
  expect(turn()!.attributes['subagentd.resumed_from']).toEqual(expect.any(String));
});
