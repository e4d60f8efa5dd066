/**
 * The daemon log: pino JSON lines to a file in the state dir, with secrets redacted.
 * A log that cannot be written (full or read-only disk) never takes the daemon down: the fault is
 * reported to `faults` (the daemon turns degraded), lines past a bounded backlog are dropped, and
 * the next line retries the write; the first one that lands clears the fault.
 */
import { pino, type Logger } from 'pino';
import type { StateFaults } from './store/state-faults.js';

/** Unwritten log bytes kept while the file cannot be written; later lines are dropped. */
const LOG_BACKLOG_BYTES = 4 * 1024 * 1024;

export const REDACT_PATHS = [
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  'env',
  '*.env',
];

export function createLogger(options: { file?: string; level?: string; stderr?: boolean; faults?: StateFaults }): Logger {
  const streams: pino.StreamEntry[] = [];
  if (options.file) {
    const file = options.file;
    const destination = pino.destination({ dest: file, mkdir: true, sync: false, mode: 0o600, maxLength: LOG_BACKLOG_BYTES });
    let faulted = false;
    destination.on('error', (error: unknown) => {
      faulted = true;
      options.faults?.report(file, error);
    });
    destination.on('write', () => {
      if (!faulted) return;
      faulted = false;
      options.faults?.cleared(file);
    });
    streams.push({ stream: destination });
  }
  if (options.stderr) streams.push({ level: 'warn', stream: pino.destination(2) });
  return pino(
    { level: options.level ?? 'info', base: { pid: process.pid }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    streams.length > 0 ? pino.multistream(streams) : pino.destination({ dest: '/dev/null' }),
  );
}
