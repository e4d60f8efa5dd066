/**
 * Cluster members continue the trace: a start with a `traceparent` sent through member A (slots
 * 0: it executes nothing) runs on member B, a real daemon on the same real nats-server. The run
 * record carries the start's traceparent, and B exports an `invoke_agent` span (its execution)
 * whose trace and parent are the client's, naming B as the member and A as the front; A's own
 * span of the run continues the same trace. A resume through A with a traceparent of its own is
 * executed on B too, and both members' spans of it continue the resume's caller's trace, not the
 * first start's. Both export to one OTLP/HTTP receiver here.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { clusterScene } from './support/cluster-scene.js';
import { makeTempDir, waitFor } from './support/daemon-process.js';
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

it("a resume through member A that executes on member B continues the resume's own caller's trace on B", async () => {
  const receiver = await startOtlpReceiver();
  try {
    const script = join(makeTempDir('cluster-resume-trace-'), 'script.json');
    writeFileSync(script, JSON.stringify({ steps: [{ text: 'first' }, { text: 'resumed' }] }));
    const model = { model: { default: `scripted:${script}` } };
    const front = await scene.member(model, { ackWaitMs: 2000, slots: 0 }, { env: tracingEnv(receiver, 'member-a') });
    await scene.member(model, { ackWaitMs: 2000 }, { env: tracingEnv(receiver, 'member-b') });
    const store = await scene.records();
    const service = await scene.clients.connect(front.socket);
    const first = (await service.start('spawn', {
      prompt: [{ type: 'text', text: 'go' }],
      parent,
      signal: AbortSignal.timeout(60_000),
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    })) as RemoteSubagentRun;
    expect((await first.result).stopReason).toBe('completed');
    const traceId = '6cf92f3577b34da6a3ce929d0e0e4738';
    const resumeSpan = '3333333333333333';
    const traceparent = `00-${traceId}-${resumeSpan}-01`;
    const resumed = await first.resume!([{ type: 'text', text: 'again' }], { traceparent });
    expect((await resumed.result).stopReason).toBe('completed');

    const record = (await store.get(resumed.id))!.record;
    expect(record.resumes?.runId).toBe(first.id);
    expect(record.request.traceparent).toBe(traceparent);
    const executor = record.worker!.id;
    expect(record.ownerMember).not.toBe(executor);

    const on = (service: string) => receiver.spans.find((s) => s.service === service && s.name.startsWith('invoke_agent') && s.attributes['subagentd.run_id'] === resumed.id);
    await waitFor(() => on('member-a') !== undefined && on('member-b') !== undefined, 20_000, () =>
      receiver.spans.map((s) => `${s.service}: ${s.name}`).join(', '),
    );
    expect(on('member-b')).toMatchObject({ traceId, parentSpanId: resumeSpan, attributes: { 'subagentd.cluster.member': executor, 'subagentd.stop_reason': 'completed' } });
    expect(on('member-a')).toMatchObject({ traceId, parentSpanId: resumeSpan, attributes: { 'subagentd.resumed_from': first.id } });
  } finally {
    await receiver.close();
  }
}, 120_000);
