/**
 * Lifecycle listeners. Observe-only: a listener that throws or rejects is logged and never
 * starves the listeners after it, nor reaches the run or the wire handler that emitted. One
 * exception, the seam's: a listener that throws on a local `provider-added` fails the
 * `registerProvider` that announced it (`emitOrThrow`).
 */
import type { ClientLogger, ServiceEventMap, ServiceEventName, ServiceListener } from './types.js';

export class EventHub {
  private readonly listeners = new Map<ServiceEventName, Set<ServiceListener<ServiceEventName>>>();

  constructor(private readonly logger: ClientLogger) {}

  on<K extends ServiceEventName>(event: K, listener: ServiceListener<K>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    // A fresh wrapper per subscription, so subscribing the same function twice yields two.
    const entry: ServiceListener<ServiceEventName> = (payload) => listener(payload as ServiceEventMap[K]);
    set.add(entry);
    return () => {
      set.delete(entry);
    };
  }

  emit<K extends ServiceEventName>(event: K, payload: ServiceEventMap[K]): void {
    this.call(event, payload, false);
  }

  /** As `emit`, but the first listener that throws stops the round and its error is thrown here. */
  emitOrThrow<K extends ServiceEventName>(event: K, payload: ServiceEventMap[K]): void {
    this.call(event, payload, true);
  }

  private call<K extends ServiceEventName>(event: K, payload: ServiceEventMap[K], rethrow: boolean): void {
    const set = this.listeners.get(event);
    if (!set) return;
    // A snapshot: a listener that subscribes another must not have it called in this round.
    for (const listener of Array.from(set)) {
      try {
        const returned: unknown = listener(payload);
        if (isThenable(returned)) {
          returned.then(undefined, (error: unknown) => this.logger.error(`a ${event} listener rejected`, error));
        }
      } catch (error) {
        if (rethrow) throw error;
        this.logger.error(`a ${event} listener threw`, error);
      }
    }
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
