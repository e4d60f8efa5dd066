/** `fork`: an in-process child seeded with the parent's completed turns (`parent.events`). */
import type { InProcessProviderOptions } from './in-process-options.js';
import { createInProcessProvider, type InProcessProvider } from './in-process-provider.js';

export function createForkProvider(options: InProcessProviderOptions): InProcessProvider {
  return createInProcessProvider(
    { name: 'fork', inheritsParentContext: true, seed: (request) => request.parent.events ?? [] },
    options,
  );
}
