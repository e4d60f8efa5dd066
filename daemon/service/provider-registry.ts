/**
 * Providers by unique name, in insertion order. Registration returns a disposer; removing a
 * provider blocks new starts and revokes no accepted run. Membership changes are announced.
 */
import { SubagentError } from '../../protocol/index.js';
import type { DaemonProvider } from '../provider.js';

export type RegistryListener = (change: { kind: 'added'; provider: DaemonProvider } | { kind: 'removed'; name: string }) => void;

export class ProviderRegistry {
  private readonly providers = new Map<string, DaemonProvider>();
  private readonly listeners = new Set<RegistryListener>();

  /** `decorate`: what every provider is wrapped in as it is registered (the daemon's worktree isolation). */
  constructor(private readonly decorate: (provider: DaemonProvider) => DaemonProvider = (provider) => provider) {}

  register(given: DaemonProvider): () => void {
    const provider = this.decorate(given);
    if (this.providers.has(provider.name)) {
      throw new SubagentError('DUPLICATE_PROVIDER', `a provider named "${provider.name}" is already registered`);
    }
    this.providers.set(provider.name, provider);
    this.announce({ kind: 'added', provider });
    let removed = false;
    return () => {
      if (removed || this.providers.get(provider.name) !== provider) return;
      removed = true;
      this.providers.delete(provider.name);
      this.announce({ kind: 'removed', name: provider.name });
    };
  }

  get(name: string): DaemonProvider | undefined {
    return this.providers.get(name);
  }

  list(): string[] {
    return [...this.providers.keys()];
  }

  all(): DaemonProvider[] {
    return [...this.providers.values()];
  }

  onChange(listener: RegistryListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private announce(change: Parameters<RegistryListener>[0]): void {
    for (const listener of this.listeners) listener(change);
  }
}
