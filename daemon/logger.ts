/**
 * The daemon log: pino JSON lines to a file in the state dir, with secrets redacted, at the level
 * asked for (each multistream entry carries its own level: without one it would drop everything
 * below info whatever the logger's level), and warnings also on stderr when asked. `pid` is in the
 * base of every line, so callers never add it.
 */
import { pino, type Logger } from 'pino';

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

export function createLogger(options: { file?: string; level?: string; stderr?: boolean }): Logger {
  const level = (options.level ?? 'info') as pino.Level;
  const streams: pino.StreamEntry[] = [];
  if (options.file) streams.push({ level, stream: pino.destination({ dest: options.file, mkdir: true, sync: false, mode: 0o600 }) });
  if (options.stderr) {
    // A closed stderr (a foreground daemon piped into `head`) must not take the daemon down.
    const stderr = pino.destination(2);
    stderr.on('error', () => undefined);
    streams.push({ level: 'warn', stream: stderr });
  }
  return pino(
    { level, base: { pid: process.pid }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    streams.length > 0 ? pino.multistream(streams) : pino.destination({ dest: '/dev/null' }),
  );
}
