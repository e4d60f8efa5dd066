/** Bounded waits whose timers never outlive the wait (an idle daemon must not be kept busy). */
import { setTimeout as sleep } from 'node:timers/promises';

/** Wait for `promise` at most `ms`; true when it settled in time. A rejection counts as settled. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms <= 0) return false;
  const timer = new AbortController();
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      sleep(ms, false, { signal: timer.signal }).catch(() => false),
    ]);
  } finally {
    timer.abort();
  }
}
