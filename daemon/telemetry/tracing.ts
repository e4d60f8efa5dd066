/**
 * OpenTelemetry traces of runs, exported over OTLP/HTTP (protobuf or JSON), following the GenAI
 * semantic conventions (docs/observability.md lists the spans and attributes):
 *
 *   invoke_agent {label|provider}        one per run, from its start request to its end
 *     subagentd.admission                the wait for a run slot
 *     chat {model}                       one per model step, with its tokens and finish reason
 *     execute_tool {tool}                one per tool call
 *     subagentd.endpoint_wait            a model endpoint's retry delay (429, 5xx)
 *     invoke_agent …                     a nested child's run (delegation) is a child span
 *
 * A run's span continues its caller's W3C `traceparent` (the start's, or its parent run's span).
 * The spans are built from the run's events as they come (run-observer.ts): a step's `chat` span
 * runs from the event that let it start (the prompt, the previous tool result) to its assistant
 * message, and a tool's from the previous call's end to its result; tools run one after another.
 * Prompt and completion text are never recorded.
 *
 * This module and the SDK load only when tracing is on (cli/daemon-command.ts).
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import type { EndParams, RunEvent, SessionEvent } from '../../protocol/index.js';
import type { ExecutionObserver } from '../cluster/cluster-worker.js';
import type { ObservedStart, RunObserver } from '../service/run-observer.js';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface TracingSettings {
  /** The full traces URL (`…/v1/traces`); absent: the exporter reads the OTEL_* variables. */
  readonly url?: string;
  readonly protocol: OtlpProtocol;
  readonly serviceName: string;
}

/**
 * Whether tracing is on, and how, from the standard variables (which win) and the config's
 * `tracing` section. Cheap and dependency-free: the daemon asks it before loading anything.
 */
export function tracingSettings(
  env: Readonly<Record<string, string | undefined>>,
  config: { readonly endpoint: string; readonly protocol?: OtlpProtocol; readonly serviceName?: string } | undefined,
): TracingSettings | undefined {
  const exporter = env['OTEL_TRACES_EXPORTER']?.trim();
  if (exporter === 'none' || env['OTEL_SDK_DISABLED'] === 'true') return undefined;
  const envEndpoint = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'];
  if (exporter !== 'otlp' && envEndpoint === undefined && config === undefined) return undefined;
  const protocol = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? config?.protocol ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (grpc is not supported), got "${protocol}"`);
  }
  const url =
    env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ??
    (env['OTEL_EXPORTER_OTLP_ENDPOINT'] ?? config?.endpoint)?.replace(/\/+$/, '').concat('/v1/traces');
  return { protocol, serviceName: env['OTEL_SERVICE_NAME'] ?? config?.serviceName ?? 'subagentd', ...(url !== undefined && { url }) };
}

export interface Tracing {
  readonly observer: RunObserver;
  /** For a cluster member: the span of each run executed here, continuing its start's trace. */
  readonly executions: ExecutionObserver;
  /** Exports what is buffered, then stops. */
  shutdown(): Promise<void>;
}

export async function startTracing(settings: TracingSettings, version: string): Promise<Tracing> {
  const options = settings.url === undefined ? {} : { url: settings.url };
  const exporter: SpanExporter =
    settings.protocol === 'http/json'
      ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(options)
      : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter(options);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer('subagentd');
  return { observer: new RunTracer(tracer), executions: executionTracer(tracer), shutdown: () => provider.shutdown() };
}

/** One run's spans in the making. */
interface RunSpans {
  readonly span: Span;
  readonly context: Context;
  readonly model?: string;
  admission?: Span;
  /** When the next model step began (the prompt, or the previous tool result). */
  stepStart: number;
  /** A model step's span, open until its usage (which follows its message) or the next event. */
  chat?: Span;
  /** When the next tool call began. */
  toolStart: number;
}

/** A scripted model is named by its file: the span says only `scripted`. */
function modelName(model: string): string {
  return model.startsWith('scripted:') ? 'scripted' : model;
}

const propagator = new W3CTraceContextPropagator();
const headerGetter = { get: (carrier: Record<string, string>, key: string) => carrier[key], keys: (carrier: Record<string, string>) => Object.keys(carrier) };

/** The context a `traceparent` names (ROOT when it is absent or malformed). */
export function contextOf(traceparent: string | undefined): Context {
  if (traceparent === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent }, headerGetter);
}

/**
 * A cluster member's side of a run it executes: an `invoke_agent` span (kind SERVER) from its
 * claim to its outcome, continuing the traceparent the run's record carries, so the trace crosses
 * members. The front member's span of the same run (RunTracer) holds its steps and tokens; this
 * one says where, in which attempt, and how the execution ended. A run whose start carried no
 * traceparent gets none (nested runs among them: their context is their parent run's span, on the front).
 */
export function executionTracer(tracer: Tracer): ExecutionObserver {
  return (run) => {
    // Without a caller's context the front's span is the whole trace: a root here would be a second, disconnected one.
    if (run.traceparent === undefined) return () => undefined;
    const name = run.label ?? run.provider;
    const span = tracer.startSpan(
      `invoke_agent ${name}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': name,
          'subagentd.provider': run.provider,
          'subagentd.run_id': run.runId,
          'subagentd.cluster.member': run.member,
          'subagentd.cluster.front': run.front,
          'subagentd.cluster.attempt': run.attempt,
          'subagentd.cluster.takeover': run.takeover,
        },
      },
      contextOf(run.traceparent),
    );
    return (outcome) => {
      span.setAttribute('subagentd.stop_reason', outcome.stopReason);
      if (outcome.stopReason === 'error') {
        span.setAttribute('error.type', outcome.errorCode ?? 'error');
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    };
  };
}

export class RunTracer implements RunObserver {
  private readonly runs = new Map<string, RunSpans>();

  constructor(private readonly tracer: Tracer) {}

  starting(start: ObservedStart): void {
    const parent = (start.parentRunId !== undefined && this.runs.get(start.parentRunId)?.context) || contextOf(start.traceparent);
    const name = start.label ?? start.provider;
    const span = this.tracer.startSpan(
      `invoke_agent ${name}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': name,
          'subagentd.provider': start.provider,
          'subagentd.run_id': start.runId,
          'subagentd.depth': start.depth,
          ...(start.parentRunId !== undefined && { 'subagentd.parent_run_id': start.parentRunId }),
          ...(start.resumedFrom !== undefined && { 'subagentd.resumed_from': start.resumedFrom }),
          ...(start.client !== undefined && { 'subagentd.client': start.client }),
          ...(start.model !== undefined && { 'gen_ai.request.model': modelName(start.model) }),
        },
      },
      parent,
    );
    const context = trace.setSpan(parent, span);
    const now = Date.now();
    this.runs.set(start.runId, {
      span,
      context,
      ...(start.model !== undefined && { model: modelName(start.model) }),
      admission: this.tracer.startSpan('subagentd.admission', { attributes: { 'subagentd.run_id': start.runId } }, context),
      stepStart: now,
      toolStart: now,
    });
  }

  admitted(runId: string, waitedMs: number): void {
    const run = this.runs.get(runId);
    run?.admission?.setAttribute('subagentd.admission.wait_ms', Math.round(waitedMs * 1000) / 1000);
    run?.admission?.end();
    if (run) delete run.admission;
  }

  ready(runId: string, child: { readonly id: string }): void {
    const run = this.runs.get(runId);
    run?.span.setAttributes({ 'gen_ai.agent.id': child.id, 'gen_ai.conversation.id': child.id });
  }

  startFailed(runId: string, code: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    this.runs.delete(runId);
    run.admission?.end();
    run.span.setAttribute('error.type', code);
    run.span.setStatus({ code: SpanStatusCode.ERROR, message: code });
    run.span.end();
  }

  event(runId: string, event: RunEvent): void {
    const run = this.runs.get(runId);
    if (!run) return;
    if (event.kind === 'retry') {
      this.closeChat(run);
      const now = Date.now();
      this.tracer
        .startSpan(
          'subagentd.endpoint_wait',
          { startTime: now, attributes: { 'subagentd.retry.attempt': event.attempt, 'subagentd.retry.reason': event.reason.slice(0, 256), ...(event.status !== undefined && { 'http.response.status_code': event.status }) } },
          run.context,
        )
        .end(now + event.delayMs);
      return;
    }
    if (event.kind === 'session') this.session(run, event.event);
  }

  private session(run: RunSpans, event: SessionEvent): void {
    const now = Date.now();
    if (event.type === 'usage') {
      run.chat?.setAttributes({ 'gen_ai.usage.input_tokens': event.usage.promptTokens, 'gen_ai.usage.output_tokens': event.usage.completionTokens });
      this.closeChat(run);
      return;
    }
    this.closeChat(run);
    switch (event.type) {
      case 'user/message':
      case 'steering/message':
        run.stepStart = now;
        break;
      case 'assistant/message': {
        const calls = event.toolCalls ?? [];
        run.chat = this.tracer.startSpan(
          run.model === undefined ? 'chat' : `chat ${run.model}`,
          {
            kind: SpanKind.CLIENT,
            startTime: run.stepStart,
            attributes: {
              'gen_ai.operation.name': 'chat',
              ...(run.model !== undefined && { 'gen_ai.request.model': run.model }),
              'gen_ai.response.finish_reasons': [calls.length > 0 ? 'tool_calls' : 'stop'],
            },
          },
          run.context,
        );
        run.toolStart = now;
        break;
      }
      case 'tool/result': {
        const span = this.tracer.startSpan(
          `execute_tool ${event.name}`,
          {
            kind: SpanKind.INTERNAL,
            startTime: run.toolStart,
            attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': event.name, 'gen_ai.tool.call.id': event.callId },
          },
          run.context,
        );
        if (event.isError) {
          span.setAttribute('error.type', 'tool_error');
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end(now);
        run.toolStart = now;
        run.stepStart = now;
        break;
      }
      default:
        break;
    }
  }

  private closeChat(run: RunSpans): void {
    run.chat?.end();
    delete run.chat;
  }

  ended(end: EndParams): void {
    const run = this.runs.get(end.runId);
    if (!run) return;
    this.runs.delete(end.runId);
    this.closeChat(run);
    run.admission?.end();
    const usage = end.usage ?? end.result?.usage;
    run.span.setAttributes({
      'subagentd.stop_reason': end.stopReason,
      ...(usage && { 'gen_ai.usage.input_tokens': usage.promptTokens, 'gen_ai.usage.output_tokens': usage.completionTokens }),
    });
    if (end.stopReason === 'error') {
      run.span.setAttribute('error.type', end.error ? 'infrastructure' : 'error');
      run.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    run.span.end();
  }
}
