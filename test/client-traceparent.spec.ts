/**
 * The client's side of trace context (client/trace-context.ts): a start carries the caller's
 * `traceparent` option, else the active OpenTelemetry span's (an SDK registered in this process),
 * else none; on `subagent/start` as on `child/start`.
 */
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, StackContextManager, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, expect, it } from 'vitest';
import { connect, type ClientStartRequest, type RemoteSubagentService } from '../client/index.js';
import { FakeDaemon, captureLogger, descriptor } from './support/fake-daemon-peer.js';

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
