/**
 * The W3C `traceparent` a start or a continuation sends (protocol: `traceparent` on
 * `subagent/start`, `child/start`, `run/resume` and `child/send`): the caller's explicit one, else
 * the active OpenTelemetry span's, if the process runs an OpenTelemetry SDK. The API is loaded only
 * when one registered its globals, so a client without tracing pays one property read.
 */
import { createRequire } from 'node:module';

/** Where every copy of @opentelemetry/api 1.x keeps the registered context manager and providers. */
const OTEL_API_GLOBAL = Symbol.for('opentelemetry.js.api.1');

export function activeTraceparent(): string | undefined {
  if ((globalThis as Record<symbol, unknown>)[OTEL_API_GLOBAL] === undefined) return undefined;
  let api: typeof import('@opentelemetry/api');
  try {
    api = createRequire(import.meta.url)('@opentelemetry/api') as typeof import('@opentelemetry/api');
  } catch {
    return undefined;
  }
  const span = api.trace.getActiveSpan()?.spanContext();
  if (!span || !api.isSpanContextValid(span)) return undefined;
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * A well-formed `traceparent` from a request's `_meta` (the MCP and ACP convention for W3C trace
 * context), for the faces; anything else is ignored, not refused: tracing never fails a request.
 */
export function metaTraceparent(meta: Readonly<Record<string, unknown>> | null | undefined): string | undefined {
  const value = meta?.['traceparent'];
  return typeof value === 'string' && TRACEPARENT.test(value) ? value : undefined;
}

