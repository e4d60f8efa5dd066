/** The daemon log: pino JSON lines to a file in the state dir, with secrets redacted. */
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
  const streams: pino.StreamEntry[] = [];
  if (options.file) streams.push({ stream: pino.destination({ dest: options.file, mkdir: true, sync: false, mode: 0o600 }) });
  if (options.stderr) streams.push({ level: 'warn', stream: pino.destination(2) });
  return pino(
    { level: options.level ?? 'info', base: { pid: process.pid }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    streams.length > 0 ? pino.multistream(streams) : pino.destination({ dest: '/dev/null' }),
  );
}
