/**
 * A harness start request, mapped field by field onto the client's. Nothing is spread: a field
 * this version does not know is dropped (and logged at debug), never sent. The harness's
 * `agentOptions` hold the PARENT's model route and are never forwarded; the children's model
 * comes from the bridge config.
 */
import type { AgentOptions } from '../protocol/index.js';
import { metaTraceparent, type ClientStartRequest } from '../client/index.js';
import type { HarnessStartRequest } from './harness-types.js';

const MAPPED = new Set(['label', 'prompt', 'parent', 'signal', 'persona', 'toolFilter', 'maxDepth', 'outputSchema']);
/** Known and deliberately not forwarded. */
const WITHHELD = new Set(['agentOptions', 'descriptor']);

export interface MappedRequest {
  readonly request: ClientStartRequest;
  /** Fields present on the harness request that were not sent. */
  readonly dropped: string[];
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export function mapHarnessRequest(source: HarnessStartRequest, childOptions: AgentOptions | undefined): MappedRequest {
  const request: Mutable<ClientStartRequest> = { prompt: source.prompt, parent: source.parent, signal: source.signal };
  if (source.label !== undefined) request.label = source.label;
  if (source.persona !== undefined) request.persona = source.persona;
  if (source.maxDepth !== undefined) request.maxDepth = source.maxDepth;
  if (source.outputSchema !== undefined) request.outputSchema = source.outputSchema as ClientStartRequest['outputSchema'] & object;
  if (source.toolFilter !== undefined) request.toolFilter = source.toolFilter as ClientStartRequest['toolFilter'] & object;
  if (childOptions !== undefined) request.agentOptions = childOptions;
  // The harness's trace context: a traceparent its request carries wins; without one the client
  // sends the harness's active OpenTelemetry span's (client/trace-context.ts). A malformed one is ignored.
  const traceparent = metaTraceparent(source);
  if (traceparent !== undefined) request.traceparent = traceparent;
  const dropped = Object.keys(source).filter((key) => !MAPPED.has(key) && !WITHHELD.has(key) && !(key === 'traceparent' && traceparent !== undefined));
  return { request, dropped };
}
