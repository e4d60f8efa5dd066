/** `spawn`: a fresh in-process child that does not see the parent's conversation. */
import type { InProcessProviderOptions } from './in-process-options.js';
import { createInProcessProvider, type InProcessProvider } from './in-process-provider.js';

export function createSpawnProvider(options: InProcessProviderOptions): InProcessProvider {
  return createInProcessProvider({ name: 'spawn', inheritsParentContext: false, seed: () => [] }, options);
}
