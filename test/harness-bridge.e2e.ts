/**
 * The bridge against a daemon, with a recording stand-in for the harness's Cordis context (the
 * real harness runs in test/harness-lane.e2e.ts): provider events mirrored into `ctx.subagents`,
 * the `providers` mapping, and daemon loss — loud, typed, and recovered after a restart.
 */
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, StackContextManager, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import type { HarnessContext, HarnessProvider } from '../harness/index.js';
import { apply } from '../harness/index.js';
import { rejection } from './support/assertions.js';
import { restartDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { startE2eDaemon } from './support/e2e-daemon.js';
import { FakeDaemon, descriptor, until } from './support/fake-daemon-peer.js';
import { REPO } from './support/daemon-process.js';
import { startOtlpReceiver } from './support/otlp-receiver.js';
import { join } from 'node:path';

const HELLO = `scripted:${join(REPO, 'examples', 'hello.json')}`;

/** What a Cordis context gives the plugin, recorded. */
class RecordingContext implements HarnessContext {
  readonly providers = new Map<string, HarnessProvider>();
  readonly lines: Array<{ level: string; text: string }> = [];
  private readonly disposers: Array<() => void | Promise<void>> = [];
  readonly subagents = {
    registerProvider: (provider: HarnessProvider) => {
      if (this.providers.has(provider.name)) throw new Error(`duplicate provider ${provider.name}`);
      this.providers.set(provider.name, provider);
      return () => void this.providers.delete(provider.name);
    },
  };
  logger() {
    const line = (level: string) => (format: unknown, ...args: unknown[]) => {
      let index = 0;
      this.lines.push({ level, text: String(format).replace(/%s/g, () => String(args[index++])) });
    };
    return { error: line('error'), warn: line('warn'), info: line('info'), debug: line('debug') };
  }
  effect(execute: () => () => void | Promise<void>) {
    this.disposers.push(execute());
  }
  async dispose(): Promise<void> {
    for (const dispose of this.disposers.splice(0)) await dispose();
  }
}

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

const parent = { session: { id: 'harness-parent', header: { cwd: REPO } } };
const startRequest = () => ({ prompt: [{ type: 'text' as const, text: 'go' }], parent, signal: new AbortController().signal });

describe('provider events', () => {
  it('mirrors providers added to and removed from the daemon, with their real capabilities', async () => {
    const daemon = await FakeDaemon.start({ providers: [descriptor('spawn', { caps: { depthLimit: true } }), descriptor('fork', { inheritsParentContext: true })] });
    cleanup.push(() => daemon.close());
    const ctx = new RecordingContext();
    cleanup.push(() => ctx.dispose());
    await apply(ctx, { socket: daemon.socketPath });
    expect([...ctx.providers.keys()]).toEqual(['spawn', 'fork']);
    expect(ctx.providers.get('spawn')!.capabilities.depthLimit).toBe(true);
    expect(ctx.providers.get('fork')!.inheritsParentContext).toBe(true);

    const peer = await daemon.connection();
    await peer.notify('subagent/provider-added', { provider: descriptor('acp') });
    await until(() => ctx.providers.has('acp'), 2000, 'acp to be registered');
    await peer.notify('subagent/provider-removed', { name: 'spawn' });
    await until(() => !ctx.providers.has('spawn'), 2000, 'spawn to be unregistered');
    expect([...ctx.providers.keys()].sort()).toEqual(['acp', 'fork']);

    await ctx.dispose();
    expect(ctx.providers.size).toBe(0);
  });

  it('registers only the mapped providers, under their harness names, and warns about missing ones', async () => {
    const daemon = await FakeDaemon.start({ providers: [descriptor('spawn'), descriptor('fork', { inheritsParentContext: true })] });
    cleanup.push(() => daemon.close());
    const ctx = new RecordingContext();
    cleanup.push(() => ctx.dispose());
    await apply(ctx, { socket: daemon.socketPath, providers: { pooled: 'spawn', remote: 'codex' } });
    expect([...ctx.providers.keys()]).toEqual(['pooled']);
    expect(ctx.lines).toContainEqual({ level: 'warn', text: 'provider remote (daemon provider codex) is not offered by the daemon' });
  });

  it('refuses a bad config before connecting, naming the field', async () => {
    const ctx = new RecordingContext();
    await expect(apply(ctx, { providers: { pooled: '' } })).rejects.toMatchObject({ code: 'INVALID_REQUEST', data: { field: 'providers.pooled' } });
  });
});

describe('daemon loss', () => {
  it('is loud once, fails delegations with a typed error, and recovers when the daemon is back', async () => {
    let daemon: DaemonProcess = await startE2eDaemon({ detachGraceMs: 0 });
    cleanup.push(() => daemon.stop());
    const ctx = new RecordingContext();
    cleanup.push(() => ctx.dispose());
    // No auto-start: the test restarts the daemon itself (an auto-started one would outlive the test).
    await apply(ctx, { socket: daemon.socket, agentOptions: { model: HELLO }, autoStart: false });
    const spawn = ctx.providers.get('spawn')!;
    const run = await spawn.start(startRequest());
    expect((await run.result).stopReason).toBe('completed');
    await run.dispose();

    daemon.proc.kill('SIGKILL');
    await waitFor(() => ctx.lines.some((line) => line.level === 'error'), 10_000, () => 'the outage to be logged');
    const error = await rejection(ctx.providers.get('spawn')!.start(startRequest()));
    expect(error.code).toBe('DAEMON_UNAVAILABLE');
    expect(ctx.providers.has('spawn')).toBe(true); // the tool does not silently vanish

    daemon = await restartDaemon(daemon);
    await waitFor(() => ctx.lines.some((line) => line.text.startsWith('reconnected')), 30_000, () => JSON.stringify(ctx.lines));
    expect(ctx.lines.filter((line) => line.level === 'error')).toHaveLength(1);
    const again = await ctx.providers.get('spawn')!.start(startRequest());
    expect((await again.result).output[0]).toMatchObject({ type: 'text' });
    await again.dispose();
  }, 60_000);
});

describe("the harness's trace context", () => {
  it("the daemon's run span is a child of the harness's active span, or of the traceparent its request carries", async () => {
    const receiver = await startOtlpReceiver();
    cleanup.push(() => receiver.close());
    const daemon = await startE2eDaemon({ detachGraceMs: 0 }, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    cleanup.push(() => daemon.stop());
    const ctx = new RecordingContext();
    cleanup.push(() => ctx.dispose());
    await apply(ctx, { socket: daemon.socket, agentOptions: { model: HELLO }, autoStart: false });
    const spawn = ctx.providers.get('spawn')!;

    // The harness process runs an OpenTelemetry SDK, its turn's span active while it delegates.
    context.setGlobalContextManager(new StackContextManager().enable());
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })] });
    trace.setGlobalTracerProvider(provider);
    cleanup.push(() => {
      context.disable();
      trace.disable();
    });
    const turn = provider.getTracer('harness').startSpan('harness turn');
    const active = await context.with(trace.setSpan(ROOT_CONTEXT, turn), () => spawn.start({ ...startRequest(), label: 'active' }));
    turn.end();
    await active.result;
    await active.dispose();

    // A harness whose request carries its context: that one wins over the active span.
    const carriedTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const carriedSpan = '00f067aa0ba902b7';
    const carried = await context.with(trace.setSpan(ROOT_CONTEXT, turn), () =>
      spawn.start({ ...startRequest(), label: 'carried', traceparent: `00-${carriedTrace}-${carriedSpan}-01` }),
    );
    await carried.result;
    await carried.dispose();

    const span = (label: string) => receiver.spans.find((s) => s.name === `invoke_agent ${label}`);
    await waitFor(() => span('active') !== undefined && span('carried') !== undefined, 15_000, () => receiver.spans.map((s) => s.name).join(', '));
    expect(span('active')).toMatchObject({ traceId: turn.spanContext().traceId, parentSpanId: turn.spanContext().spanId });
    expect(span('carried')).toMatchObject({ traceId: carriedTrace, parentSpanId: carriedSpan });
  }, 60_000);
});
