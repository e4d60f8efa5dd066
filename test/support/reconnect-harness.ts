/**
 * Helpers for the reconnect tests: a unix-socket proxy in front of a real daemon that the test
 * can sever (the daemon stays up and merely loses the connection), a hard kill, and a deadline.
 * Restarts use `restartDaemon` from daemon-process.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { RemoteSubagentService, ServiceEventMap, ServiceEventName } from '../../client/index.js';
import { makeTempDir } from './daemon-process.js';

export class SocketProxy {
  /** Connections accepted so far (each one is piped to the daemon). */
  accepted = 0;
  private readonly pairs = new Set<[Socket, Socket]>();

  private constructor(
    readonly dir: string,
    readonly socket: string,
    private readonly server: Server,
  ) {}

  /** Listen at a fresh path; the daemon's token is copied beside it, as a client looks for it there. */
  static async start(target: string): Promise<SocketProxy> {
    const dir = makeTempDir('subagentd-proxy-');
    const path = join(dir, 'proxy.sock');
    copyFileSync(`${target}.token`, `${path}.token`);
    const server = createServer();
    const proxy = new SocketProxy(dir, path, server);
    server.on('connection', (client) => {
      proxy.accepted += 1;
      const upstream = createConnection(target);
      const pair: [Socket, Socket] = [client, upstream];
      proxy.pairs.add(pair);
      const drop = (): void => {
        proxy.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      for (const side of pair) {
        side.on('error', drop);
        side.on('close', drop);
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    return proxy;
  }

  get open(): number {
    return this.pairs.size;
  }

  /** Cut every connection through the proxy, both ways; new ones are still accepted. */
  sever(): void {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  async close(): Promise<void> {
    this.sever();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** SIGKILL, and wait until the process is gone. */
export async function killHard(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGKILL');
  await exited;
}

/** Settle with `promise`, or reject after `ms` saying what did not happen. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The next `event` the service emits. */
export function next<K extends ServiceEventName>(service: RemoteSubagentService, event: K): Promise<ServiceEventMap[K]> {
  return new Promise((resolve) => {
    const off = service.on(event, (payload) => {
      off();
      resolve(payload);
    });
  });
}

/** Whether `promise` has settled yet, readable synchronously. */
export function track(promise: Promise<unknown>): { settled: boolean } {
  const state = { settled: false };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}
