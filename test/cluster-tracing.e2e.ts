/**
 * Cluster members continue the trace: a start with a `traceparent` sent through member A (slots
 * 0: it executes nothing) runs on member B, a real daemon on the same real nats-server. The run
 * record carries the start's traceparent, and B exports an `invoke_agent` span (its execution)
 * whose trace and parent are the client's, naming B as the member and A as the front; A's own
 * span of the run continues the same trace. Both export to one OTLP/HTTP receiver here.
 */
import { expect, it } from 'vitest';
import { clusterScene } from './support/cluster-scene.js';
import { waitFor } from './support/daemon-process.js';
import { startOtlpReceiver, type OtlpReceiver } from './support/otlp-receiver.js';

const scene = clusterScene('subagentd-cluster-trace-');
const parent = { sessionId: 'cluster-trace', cwd: process.cwd() };

const tracingEnv = (receiver: OtlpReceiver, service: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_SERVICE_NAME: service,
});

it("a start through member A that executes on member B continues the client's trace on B", async () => {
  const receiver = await startOtlpReceiver();
  try {
    const model = { model: { default: scene.scriptedModel(10) } };
    const front = await scene.member(model, { ackWaitMs: 2000, slots: 0 }, { env: tracingEnv(receiver, 'member-a') });
    await scene.member(model, { ackWaitMs: 2000 }, { env: tracingEnv(receiver, 'member-b') });
    const store = await scene.records();
    const service = await scene.clients.connect(front.socket);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const clientSpan = '00f067aa0ba902b7';
    const traceparent = `00-${traceId}-${clientSpan}-01`;
    const run = await service.start('spawn', { label: 'traced', prompt: [{ type: 'text', text: 'go' }], parent, signal: AbortSignal.timeout(60_000), traceparent });
    expect((await run.result).stopReason).toBe('completed');

    const record = (await store.get(run.id))!.record;
    expect(record.request.traceparent).toBe(traceparent);
    const executor = record.worker!.id;

    const on = (service: string) => receiver.spans.find((s) => s.service === service && s.name === 'invoke_agent traced');
    await waitFor(() => on('member-a') !== undefined && on('member-b') !== undefined, 20_000, () =>
      receiver.spans.map((s) => `${s.service}: ${s.name}`).join(', '),
    );
    expect(on('member-b')).toMatchObject({
      traceId,
      parentSpanId: clientSpan,
      attributes: { 'subagentd.run_id': run.id, 'subagentd.cluster.member': executor, 'subagentd.cluster.front': record.ownerMember, 'subagentd.stop_reason': 'completed' },
    });
    expect(record.ownerMember).not.toBe(executor);
    expect(on('member-a')).toMatchObject({ traceId, parentSpanId: clientSpan, attributes: { 'subagentd.run_id': run.id } });
  } finally {
    await receiver.close();
  }
}, 120_000);
