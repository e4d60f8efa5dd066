/** Small assertions shared by the suites. */
import { expect } from 'vitest';
import { SubagentError } from '../../protocol/index.js';

/** The typed error `promise` rejects with (fails the test if it fulfils or rejects otherwise). */
export async function rejection(promise: Promise<unknown>): Promise<SubagentError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SubagentError);
  return error as SubagentError;
}
