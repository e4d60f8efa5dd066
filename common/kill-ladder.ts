/**
 * The kill ladder, one home for every process we stop (the private stdio daemon, the shared
 * daemon after its drain, ACP agents and the agent groups a dead daemon left): act on the
 * process (close its stdin, SIGTERM, SIGKILL), wait a bounded time for it to be gone, and only
 * then take the next, harsher step. What "gone" means (a child's exit, /proc, a socket that stops
 * answering) is the caller's; so is what to do when it outlives the last rung.
 */
export interface Rung<Step extends string> {
  /** The name the caller reports: 'stdin', 'SIGTERM', 'SIGKILL'. */
  readonly step: Step;
  /** Close stdin or send the signal. It must not throw: a process already gone is no error. */
  readonly act: () => void;
  /** How long to wait for the process to be gone before the next rung (Infinity: for ever). */
  readonly waitMs: number;
}

/**
 * Climbs `rungs` in order until `goneWithin(ms)` says the process went. Resolves with the step
 * after which it was gone, or undefined when it outlived every rung.
 */
export async function climbKillLadder<Step extends string>(
  rungs: readonly Rung<Step>[],
  goneWithin: (ms: number) => Promise<boolean>,
): Promise<Step | undefined> {
  for (const rung of rungs) {
    rung.act();
    if (await goneWithin(rung.waitMs)) return rung.step;
  }
  return undefined;
}
