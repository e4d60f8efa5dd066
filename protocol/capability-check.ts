/**
 * The seam's start-time capability check, in its fixed order (outputSchema, maxDepth, toolFilter,
 * persona): the first field the request sets whose capability the provider lacks fails with
 * UNSUPPORTED_CAPABILITY naming the field, and the provider is never called. One home for the
 * daemon's start checks and the client's local providers.
 */
import { SubagentError } from './errors.js';
import type { SubagentCapabilities, SubagentStartRequestBase } from './seam.js';

const CAPABILITY_ORDER = [
  ['outputSchema', 'outputSchema'],
  ['maxDepth', 'depthLimit'],
  ['toolFilter', 'toolFilter'],
  ['persona', 'persona'],
] as const satisfies ReadonlyArray<readonly [keyof SubagentStartRequestBase, keyof SubagentCapabilities]>;

type CheckedFields = { readonly [K in (typeof CAPABILITY_ORDER)[number][0]]?: unknown };

export function assertCapabilities(
  provider: { readonly name: string; readonly capabilities: SubagentCapabilities },
  request: CheckedFields,
): void {
  for (const [field, capability] of CAPABILITY_ORDER) {
    if (request[field] !== undefined && !provider.capabilities[capability]) {
      throw new SubagentError(
        'UNSUPPORTED_CAPABILITY',
        `provider "${provider.name}" does not support ${field} (capability "${capability}" is false)`,
        { field: `/${field}` },
      );
    }
  }
}
