/**
 * The daemon's providers as this client last heard of them: seeded by `initialize`, kept current
 * by `subagent/provider-added` / `-removed`, replaceable wholesale by `providers/list`.
 */
import type { ProviderDescriptor } from '../protocol/index.js';
import type { EventHub } from './event-hub.js';

export class ProviderDirectory {
  /** In daemon order: a Map keeps insertion order, and re-adding a known name keeps its place. */
  private readonly descriptors = new Map<string, ProviderDescriptor>();

  constructor(private readonly events: EventHub) {}

  get(name: string): ProviderDescriptor | undefined {
    return this.descriptors.get(name);
  }

  has(name: string): boolean {
    return this.descriptors.has(name);
  }

  names(): string[] {
    return [...this.descriptors.keys()];
  }

  added(descriptor: ProviderDescriptor): void {
    this.descriptors.set(descriptor.name, descriptor);
    this.events.emit('subagent/provider-added', { provider: descriptor, origin: 'daemon' });
  }

  removed(name: string): void {
    if (!this.descriptors.delete(name)) return;
    this.events.emit('subagent/provider-removed', { name, origin: 'daemon' });
  }

  /** Adopt a full list, announcing only what changed. */
  replace(descriptors: readonly ProviderDescriptor[]): void {
    const next = new Set(descriptors.map((descriptor) => descriptor.name));
    for (const name of this.names()) if (!next.has(name)) this.removed(name);
    for (const descriptor of descriptors) {
      if (!sameDescriptor(this.descriptors.get(descriptor.name), descriptor)) this.added(descriptor);
    }
  }

  /** The initial list: no events, since nobody could have subscribed yet. */
  seed(descriptors: readonly ProviderDescriptor[]): void {
    for (const descriptor of descriptors) this.descriptors.set(descriptor.name, descriptor);
  }
}

function sameDescriptor(a: ProviderDescriptor | undefined, b: ProviderDescriptor): boolean {
  if (!a) return false;
  return (
    a.inheritsParentContext === b.inheritsParentContext &&
    a.runtime.sendMessage === b.runtime.sendMessage &&
    a.runtime.resume === b.runtime.resume &&
    a.capabilities.outputSchema === b.capabilities.outputSchema &&
    a.capabilities.depthLimit === b.capabilities.depthLimit &&
    a.capabilities.toolFilter === b.capabilities.toolFilter &&
    a.capabilities.persona === b.capabilities.persona
  );
}
