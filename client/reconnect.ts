/**
 * The reconnect policy of a socket connection: how many times to re-dial a lost daemon and how
 * long to wait before each try (exponential, capped, with jitter so that many clients dropped
 * at once do not hammer a restarting daemon in lockstep).
 */

export interface ReconnectOptions {
  /** Re-dials before giving up. Default 10. */
  readonly maxAttempts?: number;
  /** Wait before the first re-dial; doubles per attempt. Default 100 ms. */
  readonly initialDelayMs?: number;
  /** Cap on the wait between two re-dials. Default 5000 ms. */
  readonly maxDelayMs?: number;
}

export interface ReconnectPolicy {
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export const RECONNECT_DEFAULTS: ReconnectPolicy = { maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5000 };

/** `undefined`/`false` → off; `true` → the defaults; an object → the defaults it overrides. */
export function reconnectPolicy(option: ReconnectOptions | boolean | undefined): ReconnectPolicy | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return RECONNECT_DEFAULTS;
  const policy: ReconnectPolicy = {
    maxAttempts: option.maxAttempts ?? RECONNECT_DEFAULTS.maxAttempts,
    initialDelayMs: option.initialDelayMs ?? RECONNECT_DEFAULTS.initialDelayMs,
    maxDelayMs: option.maxDelayMs ?? Math.max(RECONNECT_DEFAULTS.maxDelayMs, option.initialDelayMs ?? 0),
  };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) {
    throw new RangeError(`reconnect.maxAttempts must be a positive integer, not ${String(option.maxAttempts)}`);
  }
  for (const key of ['initialDelayMs', 'maxDelayMs'] as const) {
    if (!Number.isFinite(policy[key]) || policy[key] < 0) {
      throw new RangeError(`reconnect.${key} must be a finite number ≥ 0, not ${String(option[key])}`);
    }
  }
  if (policy.maxDelayMs < policy.initialDelayMs) {
    throw new RangeError(`reconnect.maxDelayMs (${policy.maxDelayMs}) is below reconnect.initialDelayMs (${policy.initialDelayMs})`);
  }
  return policy;
}

/**
 * The wait before re-dial number `attempt` (1-based): `initialDelayMs · 2^(attempt-1)`, capped
 * at `maxDelayMs`, then jittered into its upper half, so it never exceeds the cap.
 */
export function backoffDelay(policy: ReconnectPolicy, attempt: number, random: () => number = Math.random): number {
  const exponential = policy.initialDelayMs * 2 ** Math.min(attempt - 1, 30);
  const capped = Math.min(policy.maxDelayMs, exponential);
  return Math.round(capped / 2 + random() * (capped / 2));
}

/** A wait that `interrupt()` cuts short (closing the service while it reconnects). */
export class Pause {
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.interrupt(), ms);
    });
  }

  interrupt(): void {
    clearTimeout(this.timer);
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
