/**
 * The ACP face carries its editor's trace context: a `session/prompt` with `_meta.traceparent`
 * starts a run whose `invoke_agent` span (exported by the auto-started daemon, tracing on through
 * the standard OTEL_* variables) is a child of the editor's span; the session's next prompt (a
 * resume of its child) continues that prompt's own span. A malformed one is ignored: the prompt
 * still answers, and its run starts a trace of its own.
 */
import * as acp from '@agentclientprotocol/sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliSandbox, HEAVY_TEST_MS } from './support/cli-harness.js';
import { waitFor } from './support/daemon-process.js';
import { openAcpFace, type AcpFaceClient } from './support/face-harness.js';
import { startOtlpReceiver, type OtlpReceiver } from './support/otlp-receiver.js';

let box: CliSandbox;
let face: AcpFaceClient | undefined;
let receiver: OtlpReceiver;

beforeAll(async () => {
  box = new CliSandbox('subagentd-acp-trace-');
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await face?.close().catch(() => undefined);
  await box.cleanup();
  await receiver.close();
});

it('a session/prompt with _meta.traceparent continues the editor trace in the daemon', { timeout: HEAVY_TEST_MS }, async () => {
  const script = box.file('steps.json', { steps: [{ text: 'traced answer', finish: 'stop' }, { text: 'resumed answer', finish: 'stop' }] });
  face = openAcpFace(box, ['--model', `scripted:${script}`], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
  await face.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const editorSpan = '00f067aa0ba902b7';
  const traced = await face.agent.request(acp.methods.agent.session.new, { cwd: box.work, mcpServers: [] });
  const answer = await face.agent.request(acp.methods.agent.session.prompt, {
    sessionId: traced.sessionId,
    prompt: [{ type: 'text', text: 'Answer.' }],
    _meta: { traceparent: `00-${traceId}-${editorSpan}-01` },
  });
  expect(answer.stopReason).toBe('end_turn');
  const nextSpan = '1111111111111111';
  const resumed = await face.agent.request(acp.methods.agent.session.prompt, {
    sessionId: traced.sessionId,
    prompt: [{ type: 'text', text: 'Again.' }],
    _meta: { traceparent: `00-${traceId}-${nextSpan}-01` },
  });
  expect(resumed.stopReason).toBe('end_turn');
  const untraced = await face.agent.request(acp.methods.agent.session.new, { cwd: box.work, mcpServers: [] });
  const second = await face.agent.request(acp.methods.agent.session.prompt, {
    sessionId: untraced.sessionId,
    prompt: [{ type: 'text', text: 'Answer.' }],
    _meta: { traceparent: 'not-a-traceparent' },
  });
  expect(second.stopReason).toBe('end_turn');

  const runs = () => receiver.spans.filter((s) => s.name.startsWith('invoke_agent'));
  await waitFor(() => runs().length >= 3, 15_000, () => `three invoke_agent spans; got ${receiver.spans.map((s) => s.name).join(', ')}`);
  const continued = runs().filter((s) => s.traceId === traceId);
  expect(continued.map((s) => s.parentSpanId).sort()).toEqual([editorSpan, nextSpan].sort());
  expect(continued.find((s) => s.parentSpanId === nextSpan)!.attributes['subagentd.resumed_from']).toBe(continued.find((s) => s.parentSpanId === editorSpan)!.attributes['subagentd.run_id']);
  const fresh = runs().filter((s) => s.traceId !== traceId);
  expect(fresh.map((s) => s.parentSpanId)).toEqual(['']);
});
