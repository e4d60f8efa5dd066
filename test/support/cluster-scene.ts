/**
 * The scene of a cluster e2e test, declared once: a real nats-server per test, the pool's members
 * (real daemons, the built CLI) with a `cluster` config pointing at it, clients of those members,
 * observer NATS links, and a temp dir made on first use.
 *
 * `clusterScene()` registers its own beforeEach/afterEach in the calling file. After each test it
 * closes, in this order: the clients, the observer links, the members (each stopped; one that
 * fails to stop does not keep the others running), the nats-server (its store dir removed), and
 * the temp dir. A missing nats-server fails the test (startNatsServer throws), never skips it.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import type { ClusterRun } from '../../daemon/cluster/cluster-run.js';
import { clusterNames } from '../../daemon/cluster/names.js';
import { NatsLink } from '../../daemon/cluster/nats-link.js';
import { RunRecords } from '../../daemon/cluster/run-records.js';
import { makeTempDir, restartDaemon, startDaemon, waitFor, type DaemonProcess, type StartOptions } from './daemon-process.js';
import { ClientPool } from './e2e-daemon.js';
import { startNatsServer, type NatsServer } from './nats-server.js';

/** A member's `cluster` config; `nats` defaults to the scene's server, `slots: 0` makes a front that executes nothing. */
export interface MemberCluster {
  ackWaitMs: number;
  slots?: number | undefined;
  nats?: string | undefined;
  /** `cluster.workspaces`: the roots this member serves. */
  workspaces?: string[] | undefined;
  /** `cluster.workspaceWaitMs`. */
  workspaceWaitMs?: number | undefined;
}

export interface ClusterScene {
  /** The test's nats-server (halt/restart it to test outages). */
  nats(): NatsServer;
  /** The test's temp dir, made on the first call and removed after the test. */
  dir(): string;
  /** Starts a member: `config` plus a `cluster` section for this scene's server. */
  member(config: Record<string, unknown>, cluster: MemberCluster, options?: StartOptions): Promise<DaemonProcess>;
  /** Starts an exited member again on its socket and state dir; the new process takes its place in the cleanup. */
  restart(member: DaemonProcess, options?: StartOptions): Promise<DaemonProcess>;
  /** An observer's NATS link to the scene's server, closed after the test. */
  link(): Promise<NatsLink>;
  /** The pool's run records, read over a new observer link. */
  records(): Promise<RunRecords<ClusterRun>>;
  /** A model that takes one step of `delayMs` with a tool call, then answers "done" (no network). */
  scriptedModel(delayMs: number): string;
  readonly clients: ClientPool;
}

export function clusterScene(dirPrefix = 'subagentd-cluster-'): ClusterScene {
  let server: NatsServer | undefined;
  let dir: string | undefined;
  const daemons: DaemonProcess[] = [];
  const links: NatsLink[] = [];
  const clients = new ClientPool();

  beforeEach(async () => {
    server = await startNatsServer();
  });

  afterEach(async () => {
    await clients.closeAll();
    for (const link of links.splice(0)) await link.close().catch(() => undefined);
    await Promise.allSettled(daemons.splice(0).map((d) => d.stop()));
    await server?.stop();
    server = undefined;
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  const nats = (): NatsServer => {
    if (server === undefined) throw new Error('the cluster scene has no nats-server outside a test');
    return server;
  };
  const tempDir = (): string => (dir ??= makeTempDir(dirPrefix));
  const link = async (): Promise<NatsLink> => {
    const opened = await NatsLink.open(nats().url, { name: 'test-observer' });
    links.push(opened);
    return opened;
  };

  return {
    nats,
    dir: tempDir,
    clients,
    link,
    async member(config, cluster, options = {}) {
      const { nats: url = nats().url, ...rest } = cluster;
      const section = Object.fromEntries(Object.entries({ nats: url, ...rest }).filter(([, value]) => value !== undefined));
      const daemon = await startDaemon({ ...config, cluster: section }, [], options);
      daemons.push(daemon);
      return daemon;
    },
    async restart(member, options = {}) {
      if (!daemons.includes(member)) throw new Error('the cluster scene restarts only its own members');
      const daemon = await restartDaemon(member, options);
      daemons.splice(daemons.indexOf(member), 1, daemon);
      return daemon;
    },
    async records() {
      return RunRecords.open<ClusterRun>(await link(), clusterNames().recordsBucket);
    },
    scriptedModel(delayMs) {
      const path = join(tempDir(), `script-${delayMs}.json`);
      writeFileSync(path, JSON.stringify({ steps: [{ text: 'working', delayMs, toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }] }, { text: 'done' }] }));
      return `scripted:${path}`;
    },
  };
}

/**
 * Waits (15 s at most) until `member` has noticed that its NATS connection is gone: its log says
 * so, and from then on it refuses new runs at once. A halted server is noticed a moment later,
 * longer on a loaded machine; a start sent in between waits on the NATS client's own timeouts.
 */
export async function untilMemberOffline(member: DaemonProcess): Promise<void> {
  const log = join(member.stateDir, 'daemon.log');
  const noticed = (): boolean => {
    try {
      return readFileSync(log, 'utf8').includes('cluster: NATS connection lost');
    } catch {
      return false;
    }
  };
  await waitFor(noticed, 15_000, () => `member ${member.socket} to notice that NATS is gone`);
}

/** Retries a start refused CLUSTER_UNAVAILABLE while the member is still reconnecting (for 15 s at most). */
export async function startWhenOnline<T>(start: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await start();
    } catch (error) {
      if ((error as { code?: string }).code !== 'CLUSTER_UNAVAILABLE' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** The most runs executing at once, from the records' claimed → settled intervals. */
export function peakOf(runs: readonly Pick<ClusterRun, 'claimedAt' | 'settledAt'>[]): number {
  const edges = runs.flatMap((r) => [
    { at: Date.parse(r.claimedAt!), d: 1 },
    { at: Date.parse(r.settledAt!), d: -1 },
  ]);
  edges.sort((x, y) => x.at - y.at || x.d - y.d); // an end and a start at the same ms: the end first
  let running = 0;
  let peak = 0;
  for (const edge of edges) peak = Math.max(peak, (running += edge.d));
  return peak;
}
