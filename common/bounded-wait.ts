/**
 * Bounded waits: on a promise, or on a condition that can only be polled (a process that is not
 * our child, a socket). Their timers never outlive the wait, so an idle daemon or a client that
 * is done is not kept busy. A bound of Infinity waits as long as it takes.
 */
/** How often `pollWithin` looks again. */
const POLL_EVERY_MS = 50;

/** Wait for `promise` at most `ms`; true when it settled in time. A rejection counts as settled. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = promise.then(
    () => true,
    () => true,
  );
  if (ms === Infinity) return settled;
  if (!(ms > 0)) return false;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([settled, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Look at `check` now and every 50 ms until it holds or `ms` has passed; true when it held. */
export async function pollWithin(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, POLL_EVERY_MS));
  }
}
