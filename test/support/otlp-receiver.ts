/**
 * An OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` in OpenTelemetry's JSON
 * mapping (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and keeps every span, decoded.
 */
import { createServer, type Server } from 'node:http';

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly service: string;
  readonly attributes: Readonly<Record<string, unknown>>;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:PORT`: the value for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };

function valueOf(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

/** The JSON mapping writes ids as hex; accept base64 too (an older exporter's choice). */
function hexId(id: string | undefined, bytes: number): string {
  if (id === undefined || id === '') return '';
  if (new RegExp(`^[0-9a-f]{${bytes * 2}}$`).test(id)) return id;
  return Buffer.from(id, 'base64').toString('hex');
}

function attributes(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces' || !String(request.headers['content-type']).includes('json')) {
        response.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }>;
      };
      for (const resourceSpans of body.resourceSpans ?? []) {
        const service = String(attributes(resourceSpans.resource?.attributes)['service.name'] ?? '');
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: hexId(span['traceId'] as string, 16),
              spanId: hexId(span['spanId'] as string, 8),
              parentSpanId: hexId(span['parentSpanId'] as string | undefined, 8),
              name: span['name'] as string,
              service,
              attributes: attributes(span['attributes'] as KeyValue[]),
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
