/**
 * For the client-level e2e suites: a real daemon process (the built CLI) without the fixture
 * providers, whose environment the test chooses, plus small helpers around it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterEach, beforeEach } from 'vitest';
import { connect, type RemoteSubagentService } from '../../client/index.js';
import { startDaemon, type DaemonProcess } from './daemon-process.js';

export function startE2eDaemon(config: Record<string, unknown>, env: Record<string, string> = {}, cwd?: string): Promise<DaemonProcess> {
  return startDaemon(config, [], { env, fixtures: false, ...(cwd !== undefined && { cwd }) });
}

/**
 * Clients opened during a test, closed afterwards. A client that the test closed itself is
 * closed again harmlessly. What the clients report to their logger is kept in `logged` (for
 * the current test) instead of cluttering the output.
 */
export class ClientPool {
  private readonly open: RemoteSubagentService[] = [];
  readonly logged: string[] = [];

  async connect(socket: string, options: Omit<Parameters<typeof connect>[0], 'socket'> = {}): Promise<RemoteSubagentService> {
    const service = await connect({
      socket,
      requestTimeoutMs: 10_000,
      logger: {
        error: (message, error) => this.logged.push(`error: ${message} ${error instanceof Error ? error.message : ''}`),
        warn: (message) => this.logged.push(`warn: ${message}`),
      },
      ...options,
    } as Parameters<typeof connect>[0]);
    this.open.push(service);
    return service;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.open.splice(0).map((service) => service.close().catch(() => undefined)));
    this.logged.splice(0);
  }
}

/** Runs handed out during a test, disposed afterwards (the seam's "dispose on every path"). */
export class RunPool {
  private readonly runs: Array<{ dispose(): Promise<void> }> = [];

  track<R extends { dispose(): Promise<void> }>(run: R): R {
    this.runs.push(run);
    return run;
  }

  async disposeAll(): Promise<void> {
    await Promise.all(this.runs.splice(0).map((run) => run.dispose().catch(() => undefined)));
  }
}

/** Milliseconds since `t0`. */
export const since = (t0: number): number => Math.round(performance.now() - t0);

/** Direct children of `pid`, from /proc (Linux). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  const path = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(path)) return out;
  for (const item of readFileSync(path, 'utf8').trim().split(/\s+/)) {
    if (item !== '') out.push(Number(item));
  }
  return out;
}

/**
 * Per-test hooks of the model-server suites: the model server's script is reset before each test,
 * and the test's runs are disposed and its clients closed after it. `server` is a getter because
 * suites start the server in `beforeAll`.
 */
export function perTestModelServer(server: () => { beginTest(): Promise<void> }, runs: RunPool, clients: ClientPool): void {
  beforeEach(() => server().beginTest());
  afterEach(async () => {
    await runs.disposeAll();
    await clients.closeAll();
  });
}
