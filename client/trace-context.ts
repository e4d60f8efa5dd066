/**
 * The W3C `traceparent` a start sends (protocol: `traceparent` on `subagent/start` and
 * `child/start`): the caller's explicit one, else the active OpenTelemetry span's, if the process
 * runs an OpenTelemetry SDK. The API is loaded only when one registered its globals, so a client
 * without tracing pays one property read.
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
