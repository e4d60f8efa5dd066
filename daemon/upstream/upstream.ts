/**
 * The daemon's upstream: one governor per model endpoint (base URL + key identity), shared by
 * every adapter the model resolver makes, across reloads, so every child of every client meets
 * one limiter per endpoint. Explicit limits come from the config's `endpoints` section, keyed by
 * base URL, with `*` for any endpoint not named.
 *
 * The governor's machinery (governor.ts, its limit state and queue) loads with the first governor,
 * that is with the first model step sent: a daemon whose children never call a model endpoint
 * (the bench's, an ACP-only one) never reads it, and its start-up is the shorter for it.
 */
import type { EndpointGovernor, EndpointLimits, EndpointStatus } from './governor.js';
import type { SharedLimit } from './shared-limit.js';

type GovernorModules = [typeof import('./governor.js'), typeof import('./endpoint-identity.js')];
let modules: Promise<GovernorModules> | undefined;

export type EndpointsConfig = Readonly<Record<string, EndpointLimits>>;

/** Makes the pool-wide limit of one endpoint (cluster mode); absent outside a cluster. */
export type SharedLimitFactory = (endpointId: string) => SharedLimit | undefined;

export class Upstream {
  private readonly governors = new Map<string, EndpointGovernor>();

  constructor(
    private endpoints: EndpointsConfig = {},
    private shared?: SharedLimitFactory,
  ) {}

  /** Cluster mode: endpoints' limits held for the whole pool (set before the first request). */
  share(shared: SharedLimitFactory): void {
    this.shared = shared;
  }

  /** The governor of the endpoint at `baseUrl` used with `apiKey` (made on first use). */
  async governorFor(baseUrl: string, apiKey: string): Promise<EndpointGovernor> {
    modules ??= Promise.all([import('./governor.js'), import('./endpoint-identity.js')]);
    const [{ EndpointGovernor }, { endpointIdentity }] = await modules;
    // From here on synchronous: two callers of one endpoint get one governor.
    const identity = endpointIdentity(baseUrl, apiKey);
    let governor = this.governors.get(identity.id);
    if (governor === undefined) {
      const limits = this.limitsFor(identity.label);
      governor = new EndpointGovernor(identity.label, limits, this.shared?.(identity.id));
      this.governors.set(identity.id, governor);
    }
    return governor;
  }

  /** New explicit limits (a reload): governors keep their adaptive state. */
  configure(endpoints: EndpointsConfig = {}): void {
    this.endpoints = endpoints;
    for (const governor of this.governors.values()) governor.configure(this.limitsFor(governor.label));
  }

  status(): EndpointStatus[] {
    return [...this.governors.values()].map((governor) => governor.status());
  }

  close(): void {
    for (const governor of this.governors.values()) governor.close();
  }

  private limitsFor(label: string): EndpointLimits {
    for (const [url, limits] of Object.entries(this.endpoints)) {
      if (url !== '*' && url.trim().replace(/\/+$/, '') === label) return limits;
    }
    return this.endpoints['*'] ?? {};
  }
}
