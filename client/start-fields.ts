/**
 * The fields a start sends, whether of a one-shot run (`subagent/start`) or of a continuable child
 * (`child/start`): each copied only when present, the parent as a wire reference, and the one
 * depth check the daemon cannot make itself. One home, so the two starts never drift apart; and
 * the trace context a continuation (`run/resume`, `child/send`) sends, as a start does.
 */
import { SubagentError, depthProblem, minorOf, type ClientToolDeclaration, type ParentRef, type ProviderDescriptor, type StartParams } from '../protocol/index.js';
import { toParentRef } from './parent-ref.js';
import { activeTraceparent } from './trace-context.js';
import { idempotencyKeyFor } from './start-retry.js';
import type { ClientStartRequest, ClientTool } from './types.js';

export interface CommonStartFields {
  provider: string;
  label?: string;
  prompt: ClientStartRequest['prompt'];
  parent: ParentRef;
  agentOptions?: NonNullable<ClientStartRequest['agentOptions']>;
  maxDepth?: number;
  toolFilter?: NonNullable<ClientStartRequest['toolFilter']>;
  persona?: string;
  env?: Record<string, string>;
  isolation?: NonNullable<ClientStartRequest['isolation']>;
  baseRef?: string;
  includeUncommitted?: boolean;
  cleanup?: NonNullable<ClientStartRequest['cleanup']>;
  traceparent?: string;
}

export function commonStartFields(provider: string, descriptor: ProviderDescriptor, request: ClientStartRequest): CommonStartFields {
  const fields: CommonStartFields = {
    provider,
    prompt: request.prompt,
    parent: toParentRef(request.parent, { includeEvents: descriptor.inheritsParentContext }),
  };
  if (request.label !== undefined) fields.label = request.label;
  if (request.agentOptions !== undefined) fields.agentOptions = request.agentOptions;
  if (request.maxDepth !== undefined) fields.maxDepth = request.maxDepth;
  refuseNegativeZero(fields, descriptor);
  if (request.toolFilter !== undefined) fields.toolFilter = request.toolFilter;
  if (request.persona !== undefined) fields.persona = request.persona;
  if (request.env !== undefined) fields.env = { ...request.env };
  if (request.isolation !== undefined) fields.isolation = request.isolation;
  if (request.baseRef !== undefined) fields.baseRef = request.baseRef;
  if (request.includeUncommitted !== undefined) fields.includeUncommitted = request.includeUncommitted;
  if (request.cleanup !== undefined) fields.cleanup = request.cleanup;
  const traceparent = request.traceparent ?? activeTraceparent();
  if (traceparent !== undefined) fields.traceparent = traceparent;
  return fields;
}

/**
 * JSON writes -0 as 0, so the daemon could never see a -0 depth and would take it as 0: refuse
 * it here with the daemon's own words (protocol/depth.ts). Everything else about a depth the
 * daemon checks, in the seam's order; a maxDepth the provider cannot take stays its
 * UNSUPPORTED_CAPABILITY.
 */
function refuseNegativeZero(fields: CommonStartFields, descriptor: ProviderDescriptor): void {
  const checked: Array<[unknown, string]> = [
    [descriptor.capabilities.depthLimit ? fields.maxDepth : undefined, '/maxDepth'],
    [fields.parent.delegationDepth, '/parent/delegationDepth'],
    [fields.parent.subagentDepth, '/parent/subagentDepth'],
  ];
  for (const [value, field] of checked) {
    if (Object.is(value, -0)) throw new SubagentError('INVALID_REQUEST', depthProblem(value, field)!, { field });
  }
}

/** The client tools of a start by name; a name given twice is INVALID_REQUEST at its index. */
export function toolMap(tools: readonly ClientTool[] | undefined): Map<string, ClientTool> {
  const map = new Map<string, ClientTool>();
  tools?.forEach((tool, index) => {
    if (map.has(tool.name)) {
      throw new SubagentError('INVALID_REQUEST', `/tools/${index}/name repeats the tool name '${tool.name}'`, {
        field: `/tools/${index}/name`,
      });
    }
    map.set(tool.name, tool);
  });
  return map;
}

/** The wire form of a one-shot start: only fields that are present, tools without their `execute`. */
export function startParams(
  name: string,
  descriptor: ProviderDescriptor,
  request: ClientStartRequest,
  tools: ReadonlyMap<string, ClientTool>,
): StartParams {
  const params: Mutable<StartParams> = commonStartFields(name, descriptor, request);
  if (request.outputSchema !== undefined) params.outputSchema = request.outputSchema;
  if (tools.size > 0) {
    params.tools = [...tools.values()].map(({ name: toolName, description, inputSchema }): ClientToolDeclaration => ({ name: toolName, description, inputSchema }));
  }
  if (request.onEvent) params.stream = true;
  // A retried start (start-retry.ts) goes out with the same params, so under the same key.
  params.idempotencyKey = idempotencyKeyFor(request.idempotencyKey);
  return params;
}

/**
 * The `traceparent` field of a continuation: the caller's, else the active span's, as on a start.
 * None to a daemon before 1.7: its closed schema would refuse the field.
 */
export function continuationTrace(explicit: string | undefined, daemonProtocol: string): { traceparent?: string } {
  if (minorOf(daemonProtocol) < 7) return {};
  const traceparent = explicit ?? activeTraceparent();
  return traceparent === undefined ? {} : { traceparent };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
