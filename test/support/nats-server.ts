/**
 * A real nats-server with JetStream for one test: `nats-server -js -sd <tmp> -a 127.0.0.1 -p <port>`,
 * started on a free port with its own store dir, ready once it accepts TCP connections, stopped
 * by its pid, its dir removed. `restart()` starts a new server on the same port and store dir
 * (the queue and records must survive it); `stop()` may be called at any time, more than once.
 *
 * A missing nats-server is an error, never a skip: the cluster tests exist to run against the
 * real server (.ci/run installs it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './wire-peers.js';

export interface NatsServer {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly pid: number;
  /** Kills the server (SIGTERM; SIGKILL with `hard`) and waits for it to exit; keeps the store dir. */
  halt(hard?: boolean): Promise<void>;
  /** Starts a server again on the same port and store dir (after `halt`). */
  restart(): Promise<void>;
  /** Halts the server and removes its store dir. */
  stop(): Promise<void>;
}

export function natsServerAvailable(): boolean {
  return spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function startNatsServer(): Promise<NatsServer> {
  if (!natsServerAvailable()) {
    throw new Error('nats-server is not on PATH: the cluster tests need it (apt-get install -y nats-server; .ci/run installs it)');
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-nats-'));
  const storeDir = join(dir, 'js');
  let proc = await launch(port, storeDir);
  const halt = async (hard = false): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill(hard ? 'SIGKILL' : 'SIGTERM');
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get pid() {
      return proc.pid!;
    },
    halt,
    async restart() {
      await halt();
      proc = await launch(port, storeDir);
    },
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function launch(port: number, storeDir: string): Promise<ChildProcess> {
  const proc = spawn('nats-server', ['-js', '-sd', storeDir, '-a', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited ${proc.exitCode}: ${err}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`nats-server did not listen on ${port} within 10 s: ${err}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return proc;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
