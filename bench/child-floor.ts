/**
 * The child agents' floor: the same `spawn` child as the in-process row, served from a process of
 * its own by the least a remote host can do: bare vscode-jsonrpc (its own reader and writer) on a
 * unix socket, a start answered with the child's id once it is ready, its result in one
 * notification, a dispose answered once the child is disposed. No validation, no run index, no
 * admission, no ownership. The daemon ÷ this floor is what the daemon's own machinery costs; this
 * floor ÷ in-process is what crossing processes costs (bench/child-floor-server.ts runs it).
 */
import { createConnection, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createMessageConnection, SocketMessageReader, SocketMessageWriter } from 'vscode-jsonrpc/node';
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { DaemonRun } from '../daemon/provider.js';
import type { ContentBlock, SubagentResult } from '../protocol/index.js';
import { benchHost, silentLog } from './owner.js';
import { floorServerProcess, type Cleanup } from './procs.js';
import { listenUnix, type ClosableServer } from './unix-server.js';

const START = 'floor/start';
const END = 'floor/end';
const DISPOSE = 'floor/dispose';

interface FloorStart {
  readonly prompt: ContentBlock[];
  readonly cwd: string;
}

/** Serves the scripted `spawn` child on `path`, its session logs in `sessionsDir`. */
export async function listenChildFloor(path: string, script: string, sessionsDir: string): Promise<ClosableServer> {
  const provider = createSpawnProvider({
    sessionsDir,
    resolveModel: createModelResolver({ default: `scripted:${script}` }, {}),
    policy: { write: false, shell: false },
    log: silentLog,
  });
  const server = await listenUnix(path, (socket) => {
    const connection = createMessageConnection(new SocketMessageReader(socket), new SocketMessageWriter(socket));
    const runs = new Map<string, DaemonRun>();
    connection.onRequest(START, async ({ prompt, cwd }: FloorStart) => {
      // Its caller is across a wire, as the daemon's are: the child steps at once.
      const host = { ...benchHost(), steersInTurn: false };
      const run = await provider.start({ prompt, parent: { sessionId: 'bench-parent', cwd }, childDepth: 1, signal: new AbortController().signal, host });
      runs.set(run.id, run);
      void run.result.then((result) => connection.sendNotification(END, { id: run.id, result }));
      return { id: run.id };
    });
    connection.onRequest(DISPOSE, async ({ id }: { id: string }) => {
      await runs.get(id)?.dispose();
      runs.delete(id);
      return {};
    });
    socket.on('close', () => connection.dispose());
    connection.listen();
  });
  return {
    close: async () => {
      await server.close();
      await provider.dispose();
    },
  };
}

/** The floor as its own Node process; resolves once it listens. */
export function childFloorProcess(cleanup: Cleanup, path: string, script: string, sessionsDir: string): Promise<number> {
  return floorServerProcess(cleanup, fileURLToPath(new URL('./child-floor-server.js', import.meta.url)), [path, script, sessionsDir], 'the child floor');
}

export interface FloorRun {
  readonly result: Promise<SubagentResult>;
  dispose(): Promise<void>;
}

/** A client of the floor: `start` resolves once the child is ready, as the seam's does. */
export async function childFloorClient(cleanup: Cleanup, path: string): Promise<{ start(prompt: ContentBlock[], cwd: string): Promise<FloorRun> }> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = createConnection(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
  socket.on('error', () => undefined);
  const connection = createMessageConnection(new SocketMessageReader(socket), new SocketMessageWriter(socket));
  const ends = new Map<string, (result: SubagentResult) => void>();
  const early = new Map<string, SubagentResult>();
  connection.onNotification(END, ({ id, result }: { id: string; result: SubagentResult }) => {
    const settle = ends.get(id);
    if (settle) settle(result);
    else early.set(id, result);
  });
  connection.listen();
  cleanup.defer('close the child floor client', () => {
    connection.dispose();
    socket.destroy();
  });
  return {
    async start(prompt, cwd) {
      const { id } = await connection.sendRequest<{ id: string }>(START, { prompt, cwd });
      const result = new Promise<SubagentResult>((resolve) => {
        const done = early.get(id);
        if (done) resolve(done);
        else ends.set(id, resolve);
      });
      return {
        result: result.finally(() => {
          ends.delete(id);
          early.delete(id);
        }),
        dispose: async () => {
          await connection.sendRequest(DISPOSE, { id });
        },
      };
    },
  };
}
