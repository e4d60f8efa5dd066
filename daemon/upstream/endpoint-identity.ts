/**
 * Which requests share an endpoint: the same base URL with the same key. The key itself never
 * leaves the adapter; the identity holds a short hash of it, so two keys on one host (two
 * accounts, two rate limits) are two endpoints, and status and logs can name one safely.
 */
import { createHash } from '../../common/node-builtins.js';

export interface EndpointIdentity {
  /** The base URL as configured, without a trailing slash: what events and status show. */
  readonly label: string;
  /** The label plus the key's hash: the governor's key, and the cluster's. */
  readonly id: string;
}

export function endpointIdentity(baseUrl: string, apiKey: string): EndpointIdentity {
  const label = baseUrl.trim().replace(/\/+$/, '');
  const keyHash = createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
  return { label, id: `${label}#${keyHash}` };
}
