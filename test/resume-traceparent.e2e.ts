/**
 * A continuation continues its caller's trace, as a start does: a real daemon (tracing on through
 * the standard OTEL_* variables, http/json) exports to an OTLP/HTTP receiver here. A `run/resume`
 * sent with a `traceparent` makes the resumed run's `invoke_agent` span a child of that caller's
 * span (not of the first start's), and so does a `child/send` for the turn it wakes, also when it
 * waited in the inbox of a running child; a resume without one starts a trace of its own.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { makeTempDir, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js';

const clients = new ClientPool();
let daemon: DaemonProcess | undefined;
let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await clients.closeAll();
  await daemon?.stop();
  daemon = undefined;
  await receiver?.close();
});

const text = (value: string) => [{ type: 'text' as const, text: value }];
/** A caller's span: trace id `t` repeated, span id `s` repeated. */
const caller = (t: string, s: string) => ({ traceId: t.repeat(32), spanId: s.repeat(16), traceparent: `00-${t.repeat(32)}-${s.repeat(16)}-01` });

it('a resume and a child message continue their own caller’s trace; a resume without one starts a new trace', async () => {
  receiver = await startOtlpReceiver();
  const dir = makeTempDir('resume-trace-');
  const script = join(dir, 'script.json');
  // Each turn takes the next step: the first answers at once, the one after waits a little (a
  // message sent meanwhile queues in the child's inbox), the rest answer at once.
  writeFileSync(script, JSON.stringify({ steps: [{ text: 'one' }, { text: 'two', delayMs: 1500 }, { text: 'three' }, { text: 'four' }] }));
  daemon = await startE2eDaemon(
    { model: { default: `scripted:${script}` } },
    { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'subagentd-resume' },
  );
  const service = await clients.connect(daemon.socket, { ownerKey: 'owner-key-of-the-resume-trace-0123' });
  const parent = { sessionId: 'resume-trace', cwd: dir };

  // One-shot runs: start under A, resume under B, then resume with no context.
  const a = caller('a', '1');
  const b = caller('b', '2');
  const first = (await service.start('spawn', { prompt: text('first'), parent, signal: AbortSignal.timeout(60_000), traceparent: a.traceparent })) as RemoteSubagentRun;
  expect((await first.result).stopReason).toBe('completed');
  const second = await first.resume!(text('second'), { traceparent: b.traceparent });
  expect((await second.result).stopReason).toBe('completed');
  const third = await second.resume!(text('third'));
  expect((await third.result).stopReason).toBe('completed');

  // A continuable child: started under C, messaged under D while idle; under E while running
  // (the message waits in the inbox and its turn still continues E).
  const c = caller('c', '3');
  const d = caller('d', '4');
  const e = caller('e', '5');
  const children = service.children!;
  const settled: string[] = [];
  children.onSettled((notice) => void settled.push(notice.messageId ?? ''));
  const { childId } = await children.start('spawn', { prompt: text('first'), parent, label: 'kept', signal: AbortSignal.timeout(60_000), traceparent: c.traceparent });
  await waitFor(() => settled.length === 1, 30_000, () => 'the first turn to settle');
  await children.sendMessage(childId, text('second'), parent, { traceparent: d.traceparent });
  const queued = await children.sendMessage(childId, text('third'), parent, { traceparent: e.traceparent });
  await waitFor(() => settled.includes(queued.messageId), 30_000, () => `the queued turn to settle; settled: ${settled.join(', ')}`);

  await daemon.stop(); // a stopping daemon exports what its batch still holds
  daemon = undefined;
  const spans = receiver.spans;
  const runs = (): ReceivedSpan[] => spans.filter((s) => s.name.startsWith('invoke_agent'));
  await waitFor(() => runs().length === 6, 10_000, () => `six invoke_agent spans; got ${runs().map((s) => s.name).join(', ')}`);
  const ofRun = (runId: string): ReceivedSpan => runs().find((s) => s.attributes['subagentd.run_id'] === runId)!;

  expect(ofRun(first.id)).toMatchObject({ traceId: a.traceId, parentSpanId: a.spanId });
  expect(ofRun(second.id)).toMatchObject({ traceId: b.traceId, parentSpanId: b.spanId, attributes: { 'subagentd.resumed_from': first.id, 'subagentd.stop_reason': 'completed' } });
  const untraced = ofRun(third.id);
  expect(untraced.parentSpanId).toBe('');
  expect([a.traceId, b.traceId]).not.toContain(untraced.traceId);
  // The resumed run's own steps are under its span, in its caller's trace.
  expect(spans.filter((s) => s.parentSpanId === ofRun(second.id).spanId && s.name.startsWith('chat')).map((s) => s.traceId)).toEqual([b.traceId]);

  const turns = runs().filter((s) => s.attributes['gen_ai.agent.id'] === childId || s.attributes['gen_ai.agent.name'] === 'kept');
  const inTrace = (t: { traceId: string; spanId: string }) => turns.filter((s) => s.traceId === t.traceId).map((s) => s.parentSpanId);
  expect(inTrace(c)).toEqual([c.spanId]);
  expect(inTrace(d)).toEqual([d.spanId]);
  expect(inTrace(e)).toEqual([e.spanId]);
});
