/** A reason the daemon will not start that the person starting it can fix (the message says how). */
export class StartupError extends Error {
  override readonly name: string = 'StartupError';
}
