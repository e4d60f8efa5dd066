/** The seam's start-time capability check, in its fixed order; the first missing flag fails. */
import { SubagentError, type SubagentCapabilities, type SubagentStartRequestBase } from '../protocol/index.js';

const ORDER: ReadonlyArray<readonly [keyof SubagentStartRequestBase, keyof SubagentCapabilities]> = [
  ['outputSchema', 'outputSchema'],
  ['maxDepth', 'depthLimit'],
  ['toolFilter', 'toolFilter'],
  ['persona', 'persona'],
];

export function assertCapabilities(
  provider: { readonly name: string; readonly capabilities: SubagentCapabilities },
  request: SubagentStartRequestBase,
): void {
  for (const [field, flag] of ORDER) {
    if (request[field] !== undefined && !provider.capabilities[flag]) {
      throw new SubagentError(
        'UNSUPPORTED_CAPABILITY',
        `provider '${provider.name}' does not support ${field} (capability '${flag}')`,
      );
    }
  }
}
