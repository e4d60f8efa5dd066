/**
 * The daemon log: pino JSON lines to a file in the state dir, with secrets redacted, at the level
 * asked for (each multistream entry carries its own level: without one it would drop everything
 * below info whatever the logger's level), and warnings also on stderr when asked. `pid` is in the
 * base of every line, so callers never add it.
 * A log that cannot be written (full or read-only disk) never takes the daemon down: the fault is
 * reported to `faults` (the daemon turns degraded), lines past a bounded backlog are dropped, and
 * the next line retries the write; the first one that lands clears the fault (see log-file.ts).
 * The file is not a pino/sonic-boom destination: their exit hooks retry a failing write for ever.
 * File lines are written once per event-loop turn; `logger.flush()` writes them at once.
 */
import { readlinkSync, writeSync } from '../../common/node-builtins.js';
import { createRequire } from 'node:module';
import type { Level, Logger, StreamEntry } from 'pino';
import { LogFile } from './log-file.js';
import type { StateFaults } from '../store/state-faults.js';

// CommonJS by `require`, not an ES import: why in protocol/jsonrpc-runtime.ts.
const { pino } = createRequire(import.meta.url)('pino') as typeof import('pino');

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
  const level = (options.level ?? 'info') as Level;
  const streams: StreamEntry[] = [];
  if (options.file) streams.push({ level, stream: new LogFile(options.file, options.faults, LOG_BACKLOG_BYTES) });
  // Synchronous, and a closed stderr (a foreground daemon piped into `head`) loses the line only.
  if (options.stderr) streams.push({ level: 'warn', stream: stderrWriter(options.faults) });
  const settings = { level, base: { pid: process.pid }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  if (streams.length === 0) return pino(settings, pino.destination({ dest: '/dev/null' }));
  // `logger.flush()` asks the stream for `flush`, which a multistream lacks: give it its flushSync.
  const multi = Object.assign(pino.multistream(streams), {
    flush(done: (error?: Error) => void) {
      multi.flushSync();
      done();
    },
  });
  return pino(settings, multi);
}

/**
 * Warnings to stderr, written synchronously (few and small). An auto-started daemon's stderr is a
 * file in the state dir, so its faults count like the log's; a closed or full pipe loses the line.
 */
function stderrWriter(faults: StateFaults | undefined): { write(line: string): boolean } {
  let where: string | undefined;
  let faulted = false;
  return {
    write(line) {
      try {
        writeSync(2, line);
        if (faulted) faults?.cleared((where ??= stderrPath()));
        faulted = false;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EPIPE' || code === 'EAGAIN') return true;
        faulted = true;
        faults?.report((where ??= stderrPath()), error);
      }
      return true;
    },
  };
}

function stderrPath(): string {
  try {
    return readlinkSync('/proc/self/fd/2');
  } catch {
    return 'stderr';
  }
}
