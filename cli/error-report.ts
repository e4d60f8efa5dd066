/**
 * How a failed command ends: a usage mistake exits 2, anything else 1. Our own errors print their
 * message (it says what happened and what to do); anything else is a bug and prints its stack.
 * With `--json` the error is one object `{"error":{"code","message",…}}` on stdout instead.
 */
import { ConfigError } from '../daemon/config.js';
import { StartupError } from '../daemon/ops/startup-error.js';
import { SubagentError } from '../protocol/index.js';
import { UsageError } from './command-table.js';
import { inCliWords } from '../common/model-words.js';

export interface ErrorReport {
  readonly code: string;
  readonly message: string;
  readonly [detail: string]: unknown;
}

export function describeError(error: unknown): { report: ErrorReport; known: boolean } {
  if (error instanceof UsageError) return { report: { code: 'USAGE', message: error.message }, known: true };
  if (error instanceof SubagentError) {
    // The daemon words options as the library names them; here the user knows the CLI's flags.
    return { report: { ...error.details, ...extraDetails(error), code: error.code, message: inCliWords(error.message) }, known: true };
  }
  if (error instanceof ConfigError) return { report: { code: 'CONFIG', message: error.message }, known: true };
  if (error instanceof StartupError) return { report: { code: 'STARTUP', message: error.message }, known: true };
  const message = error instanceof Error ? error.message : String(error);
  return { report: { code: 'INTERNAL', message }, known: false };
}

/** Fields a client-side error adds to its seam data (e.g. a failed start's exit code and log tail). */
function extraDetails(error: SubagentError): Record<string, unknown> {
  const extra = (error as SubagentError & { report?: () => Record<string, unknown> }).report;
  return typeof extra === 'function' ? extra.call(error) : {};
}

/** Prints the error the way the caller asked for and returns the exit code. */
export function reportError(error: unknown, json: boolean): number {
  const { report, known } = describeError(error);
  if (json) process.stdout.write(`${JSON.stringify({ error: report })}\n`);
  else process.stderr.write(`subagentd: ${known ? report.message : String((error as Error)?.stack ?? error)}\n`);
  return error instanceof UsageError ? 2 : 1;
}
