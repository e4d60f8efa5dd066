/**
 * The cluster scene whose members ask the local chat-completions server (ModelServer) for every
 * step: one model server per test, every member with `maxConcurrentRuns: 2` and the API key it
 * needs in its environment.
 *
 * The model server starts after the scene's nats-server and closes after the scene stopped the
 * members that call it: vitest runs afterEach hooks in reverse order of registration, so its close
 * hook is registered before `clusterScene()` and its start hook after. Raw peers a test opens
 * close before the scene stops its members (their hook is registered after the scene's).
 */
import { afterEach, beforeEach } from 'vitest';
import { clusterScene, type ClusterScene } from './cluster-scene.js';
import type { DaemonProcess } from './daemon-process.js';
import { contentText, ModelServer } from './e2e-model-server.js';
import { RawPeer } from './raw-peer.js';

export interface ClusterModelScene {
  readonly scene: ClusterScene;
  /** The test's model server. */
  model(): ModelServer;
  /** A member on the test's model server; `slots: 0` makes a front that executes nothing. */
  member(slots?: number, ackWaitMs?: number): Promise<DaemonProcess>;
  /** Starts an exited member again, with the model's key in its environment. */
  restart(member: DaemonProcess): Promise<DaemonProcess>;
  /** An initialized raw peer on `member`, closed when the test ends. */
  peer(member: DaemonProcess, name: string): Promise<RawPeer>;
  /** The model's `n`-th request (0-based) as `role:text` lines, the system prompt left out. */
  transcript(n: number): string[];
}

const modelKey = { env: { CLUSTER_TEST_KEY: 'k' } };

export function clusterModelScene(): ClusterModelScene {
  let server: ModelServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  const scene = clusterScene();
  const peers: RawPeer[] = [];
  afterEach(() => {
    for (const peer of peers.splice(0)) peer.close();
  });
  beforeEach(async () => {
    server = await ModelServer.start();
    await server.beginTest();
  });

  const model = (): ModelServer => {
    if (server === undefined) throw new Error('the cluster model scene has no model server outside a test');
    return server;
  };
  return {
    scene,
    model,
    member(slots, ackWaitMs = 15_000) {
      return scene.member(
        { model: { baseUrl: model().baseUrl, apiKeyEnv: 'CLUSTER_TEST_KEY', default: 'test-model', maxRetries: 0 }, limits: { maxConcurrentRuns: 2 } },
        { ackWaitMs, slots },
        modelKey,
      );
    },
    restart(member) {
      return scene.restart(member, modelKey);
    },
    async peer(member, name) {
      const peer = await RawPeer.initialized(member.socket, name);
      peers.push(peer);
      return peer;
    },
    transcript(n) {
      return model()
        .messages(n)
        .filter((m) => m.role !== 'system')
        .map((m) => `${m.role}:${contentText(m)}`);
    },
  };
}
