/** The default transport: the shared daemon's unix socket. */
import { createConnection, type Socket } from 'node:net';
import { FrameMessageReader } from '../common/frame-reader.js';
import { FrameWriter } from '../common/frame-writer.js';
import { SubagentError } from '../protocol/index.js';
import { ClosedSignal, type Transport } from './transport.js';

/** Connect errors that mean "nothing is listening there". */
const NOT_RUNNING = new Set(['ENOENT', 'ECONNREFUSED']);

export function describeSocket(path: string): string {
  return `the subagentd daemon at ${path}`;
}

const notRunningErrors = new WeakSet<object>();

/** Whether an error from `openSocketTransport` means no daemon is listening (the auto-start case). */
export function isDaemonNotRunning(error: unknown): boolean {
  return typeof error === 'object' && error !== null && notRunningErrors.has(error);
}

function unreachable(path: string, error: NodeJS.ErrnoException): SubagentError {
  const code = error.code ?? 'error';
  if (NOT_RUNNING.has(code)) {
    const notRunning = new SubagentError(
      'DAEMON_UNAVAILABLE',
      `no subagentd daemon is listening at ${path} (${code}); run \`subagentd start\` to start one`,
    );
    notRunningErrors.add(notRunning);
    return notRunning;
  }
  return new SubagentError('DAEMON_UNAVAILABLE', `cannot reach ${describeSocket(path)}: ${error.message}`);
}

export async function openSocketTransport(path: string): Promise<Transport> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const attempt = createConnection(path);
    const onError = (error: NodeJS.ErrnoException): void => {
      attempt.destroy();
      reject(unreachable(path, error));
    };
    attempt.once('error', onError);
    attempt.once('connect', () => {
      attempt.off('error', onError);
      resolve(attempt);
    });
  });

  const closed = new ClosedSignal();
  let lastError: Error | undefined;
  socket.on('error', (error: Error) => {
    lastError = error;
  });
  socket.once('close', (hadError: boolean) => {
    closed.fire(hadError && lastError ? `socket error: ${lastError.message}` : 'socket closed');
  });

  return {
    // Framing gone bad can't be read past: the socket closes, naming why.
    reader: new FrameMessageReader(socket, (problem) => socket.destroy(new Error(`unreadable framing from the daemon: ${problem}`))),
    writer: new FrameWriter(socket),
    describe: () => describeSocket(path),
    onClosed: (listener) => closed.subscribe(listener),
    close: async () => {
      if (!socket.destroyed) socket.end();
      socket.destroy();
      await new Promise<void>((resolve) => closed.subscribe(() => resolve()));
    },
  };
}
