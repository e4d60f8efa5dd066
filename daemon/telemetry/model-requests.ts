/**
 * The hook model clients report their HTTP requests to, for metrics (and anything else that
 * counts them): one call per request attempt, with the endpoint's origin and the status it got.
 * Without a sink (metrics and the web view off) a report costs a loop over an empty set.
 *
 * Who reports: the OpenAI-compatible adapter (agent/model/openai-compatible.ts), and any
 * endpoint governor in front of it, through `reportModelRequest`.
 */
export interface ModelRequestSink {
  /** `endpoint`: an origin (`https://host:port`), never a path or credentials; `status`: the HTTP status, or `error` when none came. */
  modelRequest(endpoint: string, status: number | 'error'): void;
}

const sinks = new Set<ModelRequestSink>();

/** Adds a sink (metrics, the web view); returns its removal. */
export function addModelRequestSink(sink: ModelRequestSink): () => void {
  sinks.add(sink);
  return () => void sinks.delete(sink);
}

export function reportModelRequest(endpoint: string, status: number | 'error'): void {
  for (const sink of sinks) sink.modelRequest(endpoint, status);
}

/** The origin of a base URL, the only part of it that may name an endpoint in telemetry. */
export function endpointOrigin(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'invalid';
  }
}
