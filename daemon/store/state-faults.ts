/**
 * The state dir's write faults: the one place that knows whether the daemon can still record
 * what it does. Each writer (daemon log, run index, session logs) reports a failed write here and
 * reports again once a later write to the same file succeeds. While any file is faulted the
 * daemon is *degraded*: it keeps answering, `daemon/status` names the fault, and runs that cannot
 * be recorded are refused.
 *
 * `describeWriteFault` is the one wording of such a fault: the path and the errno, never a stack.
 */
import { isoTime } from '../../common/iso-time.js';
import type { Logger } from 'pino';

export interface WriteFault {
  readonly path: string;
  /** The errno name, e.g. ENOSPC, EROFS, EACCES, EDQUOT, EIO. */
  readonly code: string;
  readonly since: string;
}

export function errnoOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : 'EIO';
}

const ERRNO_TEXT: Record<string, string> = {
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EIO: 'input/output error',
};

/** "cannot write /state/runs.jsonl: ENOSPC (no space left on device)" */
export function describeWriteFault(path: string, error: unknown): string {
  const code = errnoOf(error);
  const text = ERRNO_TEXT[code];
  return `cannot write ${path}: ${code}${text ? ` (${text})` : ''}`;
}

export class StateFaults {
  private readonly faults = new Map<string, WriteFault>();
  private log: Logger | undefined;

  /** Where changes are logged; the daemon log itself may be the faulted file, so never required. */
  attach(log: Logger): void {
    this.log = log;
  }

  report(path: string, error: unknown): void {
    if (this.faults.has(path)) return;
    this.faults.set(path, { path, code: errnoOf(error), since: isoTime() });
    this.log?.error({ file: path, code: errnoOf(error) }, `state dir degraded: ${describeWriteFault(path, error)}`);
  }

  cleared(path: string): void {
    if (!this.faults.delete(path)) return;
    this.log?.info({ file: path }, 'state dir write recovered');
  }

  /** Undefined while every write succeeds; otherwise one line per faulted file. */
  degraded(): { reason: string; faults: WriteFault[] } | undefined {
    if (this.faults.size === 0) return undefined;
    const faults = [...this.faults.values()];
    return { reason: faults.map((f) => describeWriteFault(f.path, f)).join('; '), faults };
  }
}
