/**
 * Traces across processes: the test (as a harness) opens a span with OpenTelemetry's own SDK and
 * starts a run with its `traceparent`; the daemon (another process, tracing turned on by the
 * standard OTEL_* variables, http/json) exports its spans to an OTLP/HTTP receiver here. The
 * harness span, the child's `invoke_agent`, its `chat` and `execute_tool` steps and the
 * grandchild's `invoke_agent` (nested delegation) are one trace, each under the right parent,
 * with the token counts the model reported.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, expect, it } from 'vitest';
import { makeTempDir, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js';

const clients = new ClientPool();
let daemon: DaemonProcess | undefined;
let receiver: OtlpReceiver | undefined;
let harness: TracerProvider | undefined;
afterEach(async () => {
  await clients.closeAll();
  await daemon?.stop();
  await harness?.shutdown();
  await receiver?.close();
});

it('one trace from the harness span through the child (chat, execute_tool) to the grandchild', async () => {
  receiver = await startOtlpReceiver();
  const dir = makeTempDir('tracing-script-');
  const script = join(dir, 'script.json');
  // Every level replays this: delegate once, then answer. The grandchild's own delegation is
  // refused at maxDepth 2 (an error tool result), and it answers too.
  writeFileSync(
    script,
    JSON.stringify({
      steps: [
        { toolCalls: [{ id: 'call-1', name: 'subagent', arguments: { description: 'go deeper', prompt: 'delegate this' } }], usage: { promptTokens: 11, completionTokens: 4 } },
        { text: 'done at my level', usage: { promptTokens: 20, completionTokens: 6 } },
      ],
    }),
  );
  daemon = await startE2eDaemon(
    { delegation: { spawn: { providers: ['spawn'], maxDepth: 2 } }, model: { default: `scripted:${script}` } },
    { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'subagentd-under-test' },
  );

  harness = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'harness' }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${receiver.endpoint}/v1/traces` }) })],
  });
  const turn = harness.getTracer('harness').startSpan('harness turn');
  const { traceId, spanId } = turn.spanContext();
  const service = await clients.connect(daemon.socket);
  const run = await service.start('spawn', {
    label: 'reviewer',
    prompt: [{ type: 'text', text: 'start' }],
    parent: { sessionId: 'harness-session', cwd: dir },
    signal: new AbortController().signal,
    traceparent: `00-${traceId}-${spanId}-01`,
  });
  expect(await run.result).toMatchObject({ stopReason: 'completed' });
  await run.dispose();
  turn.end();
  await harness.forceFlush();
  // A stopping daemon exports what its batch still holds.
  await daemon.stop();
  daemon = undefined;

  const spans = receiver.spans;
  const named = (name: string): ReceivedSpan[] => spans.filter((s) => s.name === name);
  await waitFor(() => named('invoke_agent reviewer').length === 1 && named('harness turn').length === 1, 10_000, () => `spans: ${spans.map((s) => s.name).join(', ')}`);

  const harnessSpan = named('harness turn')[0]!;
  const child = named('invoke_agent reviewer')[0]!;
  expect(child.service).toBe('subagentd-under-test');
  // Every span of the daemon is in the harness's trace.
  expect(spans.every((s) => s.traceId === traceId)).toBe(true);
  expect(harnessSpan.spanId).toBe(spanId);
  expect(child.parentSpanId).toBe(spanId);
  expect(child.attributes).toMatchObject({
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.agent.name': 'reviewer',
    'subagentd.provider': 'spawn',
    'subagentd.run_id': run.id,
    'subagentd.depth': 1,
    'subagentd.stop_reason': 'completed',
    'gen_ai.usage.input_tokens': 31,
    'gen_ai.usage.output_tokens': 10,
  });

  const under = (parent: ReceivedSpan, prefix: string): ReceivedSpan[] => spans.filter((s) => s.parentSpanId === parent.spanId && s.name.startsWith(prefix));
  const chats = under(child, 'chat');
  expect(chats.map((c) => [c.attributes['gen_ai.usage.input_tokens'], c.attributes['gen_ai.usage.output_tokens'], c.attributes['gen_ai.response.finish_reasons']])).toEqual([
    [11, 4, ['tool_calls']],
    [20, 6, ['stop']],
  ]);
  expect(chats.every((c) => c.attributes['gen_ai.operation.name'] === 'chat')).toBe(true);
  const tools = under(child, 'execute_tool');
  expect(tools.map((t) => [t.name, t.attributes['gen_ai.tool.name'], t.attributes['gen_ai.tool.call.id']])).toEqual([['execute_tool subagent', 'subagent', 'call-1']]);
  expect(under(child, 'subagentd.admission')).toHaveLength(1);

  // The grandchild is a child span of the child's run, and says whose child it is.
  const grandchildren = under(child, 'invoke_agent');
  expect(grandchildren).toHaveLength(1);
  expect(grandchildren[0]!.attributes).toMatchObject({ 'subagentd.parent_run_id': run.id, 'subagentd.depth': 2, 'subagentd.stop_reason': 'completed' });
  // Its own delegation was refused at the cap: an execute_tool span marked as an error.
  expect(under(grandchildren[0]!, 'execute_tool').map((t) => t.attributes['error.type'])).toEqual(['tool_error']);
  // No prompt text anywhere.
  expect(JSON.stringify(spans)).not.toContain('delegate this');
});
