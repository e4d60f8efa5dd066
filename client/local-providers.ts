/**
 * Providers registered in this process. They coexist with the daemon's under one namespace and
 * follow the seam's service rules locally: capability check first (the provider is never called
 * on a failure), a minted run id, `subagent/start` then `subagent/end`.
 */
import { randomUUID } from 'node:crypto';
import { SubagentError, assertCapabilities, depthProblem, endEventOf, type SubagentRun, type SubagentStartEvent } from '../protocol/index.js';
import type { EventHub } from './event-hub.js';
import type { ClientStartRequest, LocalSubagentProvider } from './types.js';

export class LocalProviders {
  private readonly providers = new Map<string, LocalSubagentProvider>();

  constructor(private readonly events: EventHub) {}

  get(name: string): LocalSubagentProvider | undefined {
    return this.providers.get(name);
  }

  names(): string[] {
    return [...this.providers.keys()];
  }

  /**
   * Add a provider whose name the caller has checked is free; returns its idempotent disposer. A
   * `provider-added` listener that throws undoes the registration (the listeners that saw it hear
   * `provider-removed`) and its error is thrown here: nothing stays registered.
   */
  add(provider: LocalSubagentProvider): () => void {
    const { name } = provider;
    this.providers.set(name, provider);
    try {
      this.events.emitOrThrow('subagent/provider-added', {
        provider: { name, capabilities: provider.capabilities, inheritsParentContext: provider.inheritsParentContext },
        origin: 'local',
      });
    } catch (error) {
      this.providers.delete(name);
      this.events.emit('subagent/provider-removed', { name, origin: 'local' });
      throw error;
    }
    return () => {
      // Removal blocks new starts only; runs already returned stay with their holders.
      if (this.providers.get(name) !== provider) return;
      this.providers.delete(name);
      this.events.emit('subagent/provider-removed', { name, origin: 'local' });
    };
  }

  async start(provider: LocalSubagentProvider, request: ClientStartRequest): Promise<SubagentRun> {
    assertCapabilities(provider, request);
    // The seam's third check, after capabilities: the maxDepth value (protocol/depth.ts).
    const depth = request.maxDepth === undefined ? undefined : depthProblem(request.maxDepth, '/maxDepth');
    if (depth !== undefined) throw new SubagentError('INVALID_REQUEST', depth, { field: '/maxDepth' });
    if (request.signal.aborted) throw new SubagentError('ABORTED', `the start of '${provider.name}' was aborted`);
    const run = await provider.start(request);
    const identity: SubagentStartEvent = {
      runId: randomUUID(),
      provider: provider.name,
      id: run.id,
      local: run.localAgent !== undefined,
    };
    // Observe the result before announcing the start, so start precedes end even for a child
    // that has already settled (the observer always runs on a later microtask).
    run.result.then(
      (result) => this.events.emit('subagent/end', endEventOf(identity, result)),
      () => this.events.emit('subagent/end', { ...identity, stopReason: 'error' }),
    );
    this.events.emit('subagent/start', identity);
    return run;
  }
}
