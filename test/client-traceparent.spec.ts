/**
 * The client's side of trace context (client/trace-context.ts): a start carries the caller's
 * `traceparent` option, else the active OpenTelemetry span's (an SDK registered in this process),
 * else none; on `subagent/start` as on `child/start`, and on the continuations `run/resume` and
 * `child/send` (none to a daemon before 1.7, whose schema would refuse the field).
 */
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, StackContextManager, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, expect, it } from 'vitest';
import { connect, type ClientStartRequest, type RemoteSubagentService } from '../client/index.js';
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { FakeDaemon, IDENTITY, captureLogger, descriptor } from './support/fake-daemon-peer.js';

let daemon: FakeDaemon;
let service: RemoteSubagentService;
afterEach(async () => {
  await service.close();
  await daemon.close();
  context.disable();
  trace.disable();
});

const request = (extra: Partial<ClientStartRequest> = {}): ClientStartRequest => ({
  prompt: [{ type: 'text', text: 't' }],
  signal: new AbortController().signal,
  parent: { sessionId: 'p', cwd: '/w' },
  ...extra,
});

it('sends the traceparent option, else the active span, else none', async () => {
  daemon = await FakeDaemon.start({ providers: [descriptor('echo')] });
  service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
  const peer = await daemon.connection();
  const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  await service.start('echo', request());
  await service.start('echo', request({ traceparent: given }));

  // An SDK in this process, a span active: its context goes along.
  const manager = new StackContextManager();
  context.setGlobalContextManager(manager.enable());
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })] });
  trace.setGlobalTracerProvider(provider);
  const span = provider.getTracer('harness').startSpan('harness turn');
  const started = context.with(trace.setSpan(ROOT_CONTEXT, span), () => service.start('echo', request()));
  await started;
  span.end();
  const { traceId, spanId } = span.spanContext();

  const sent = peer.paramsOf('subagent/start') as Array<{ traceparent?: string }>;
  expect(sent.map((p) => p.traceparent)).toEqual([undefined, given, `00-${traceId}-${spanId}-01`]);
});

/** Registers an SDK in this process and runs `body` under an active span; returns that span's traceparent. */
async function underActiveSpan(body: () => Promise<unknown>): Promise<string> {
  context.setGlobalContextManager(new StackContextManager().enable());
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })] });
  trace.setGlobalTracerProvider(provider);
  const span = provider.getTracer('harness').startSpan('harness turn');
  await context.with(trace.setSpan(ROOT_CONTEXT, span), body);
  span.end();
  const { traceId, spanId } = span.spanContext();
  return `00-${traceId}-${spanId}-01`;
}

const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const text = [{ type: 'text' as const, text: 'again' }];

it('sends the traceparent option, else the active span, else none, on run/resume and child/send', async () => {
  const ownerKey = 'owner-key-of-the-trace-test-0123';
  daemon = await FakeDaemon.start({
    providers: [descriptor('echo', { resume: true })],
    handlers: {
      initialize: () => ({ protocolVersion: PROTOCOL_VERSION, daemon: IDENTITY, providers: [descriptor('echo', { resume: true })], features: { continuableChildren: true } }),
      'child/send': (params: { childId: string }) => ({ childId: params.childId, messageId: 'msg-1' }),
    },
  });
  service = await connect({ socket: daemon.socketPath, logger: captureLogger(), ownerKey });
  const peer = await daemon.connection();
  const run = (await service.start('echo', request())) as Awaited<ReturnType<RemoteSubagentService['adopt']>>;
  await run.resume!(text);
  await run.resume!(text, { traceparent: given });
  await service.children!.sendMessage('child-1', text, 'p');
  await service.children!.sendMessage('child-1', text, 'p', { traceparent: given });
  // Both sent in the span's synchronous scope (the stack context manager does not follow awaits).
  const active = await underActiveSpan(() => Promise.all([run.resume!(text), service.children!.sendMessage('child-1', text, 'p')]));

  const resumes = peer.paramsOf('run/resume') as Array<{ traceparent?: string }>;
  expect(resumes.map((p) => p.traceparent)).toEqual([undefined, given, active]);
  const sends = peer.paramsOf('child/send') as Array<{ traceparent?: string }>;
  expect(sends.map((p) => p.traceparent)).toEqual([undefined, given, active]);
});

it('sends no traceparent on a continuation to a 1.6 daemon, whose closed schema would refuse it', async () => {
  daemon = await FakeDaemon.start({
    providers: [descriptor('echo', { resume: true })],
    handlers: {
      initialize: () => ({ protocolVersion: '1.6.0', daemon: IDENTITY, providers: [descriptor('echo', { resume: true })], features: { continuableChildren: true } }),
      'child/send': (params: { childId: string }) => ({ childId: params.childId, messageId: 'msg-1' }),
    },
  });
  service = await connect({ socket: daemon.socketPath, logger: captureLogger(), ownerKey: 'owner-key-of-the-trace-test-0123' });
  const peer = await daemon.connection();
  const run = (await service.start('echo', request({ traceparent: given }))) as Awaited<ReturnType<RemoteSubagentService['adopt']>>;
  await run.resume!(text, { traceparent: given });
  await service.children!.sendMessage('child-1', text, 'p', { traceparent: given });
  expect((peer.paramsOf('subagent/start') as Array<{ traceparent?: string }>)[0]?.traceparent).toBe(given);
  expect(peer.paramsOf('run/resume')).toEqual([{ runId: expect.any(String), prompt: text }]);
  expect(peer.paramsOf('child/send')).toEqual([{ ownerKey: expect.any(String), childId: 'child-1', from: 'p', message: text }]);
});
