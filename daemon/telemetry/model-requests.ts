/**
 * The hook model clients report their HTTP requests to, for metrics (and anything else that
 * counts them): one call per request attempt, with the endpoint's origin and the status it got.
 * Without a sink (metrics off) a report costs one undefined check.
 *
 * Who reports: the OpenAI-compatible adapter (agent/model/openai-compatible.ts), and any
 * endpoint governor in front of it, through `reportModelRequest`.
 */
export interface ModelRequestSink {
  /** `endpoint`: an origin (`https://host:port`), never a path or credentials; `status`: the HTTP status, or `error` when none came. */
  modelRequest(endpoint: string, status: number | 'error'): void;
}

let sink: ModelRequestSink | undefined;

/** Installs (or, with undefined, removes) the one sink; returns the one it replaced. */
export function setModelRequestSink(next: ModelRequestSink | undefined): ModelRequestSink | undefined {
  const previous = sink;
  sink = next;
  return previous;
}

export function reportModelRequest(endpoint: string, status: number | 'error'): void {
  sink?.modelRequest(endpoint, status);
}

/** The origin of a base URL, the only part of it that may name an endpoint in telemetry. */
export function endpointOrigin(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'invalid';
  }
}
