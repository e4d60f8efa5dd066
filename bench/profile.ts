/**
 * `node dist/bench/profile.js [trivial|events|cluster] [seconds]`: CPU profiles of the hot path, both
 * sides. The daemon process runs under `node --cpu-prof` (written when it exits on SIGTERM);
 * this process, the client, is profiled through the inspector. The load is the wire bench's:
 * `trivial` = trivial runs (start → result → dispose) over 8 connections × 8 in flight;
 * `events` = one client streaming a long scripted run's events with the session log on;
 * `cluster` = the cluster bench's trivial runs (4 connections × 8 in flight) through a one-member
 * pool on a real nats-server, whose CPU per run is reported beside the daemon's.
 * Prints each side's top entries by self time (% of busy samples, idle excluded) and leaves the
 * .cpuprofile files in a temp dir it names (open them in Chrome DevTools).
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ContentBlock } from '../protocol/index.js';
import { abortSignal, clients, daemonProcess } from './daemons.js';
import { closedLoops } from './loops.js';
import { formatLoad } from './machine.js';
import { Cleanup, cpuSecondsOf, ownCpuSeconds } from './procs.js';
import { makeWorld } from './workspace.js';
import { startNatsServer } from '../test/support/nats-server.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
}

export interface TopEntry {
  readonly share: number;
  readonly name: string;
  readonly where: string;
}

const NOT_BUSY = new Set(['(idle)', '(program)']);

/** The `limit` functions with the most self time, as shares of the busy samples. */
export function topSelfTime(profile: CpuProfile, limit: number): TopEntry[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const counts = new Map<string, { name: string; where: string; samples: number }>();
  let busy = 0;
  for (const id of profile.samples) {
    const frame = byId.get(id)?.callFrame;
    if (!frame || NOT_BUSY.has(frame.functionName)) continue;
    busy += 1;
    const where = frame.url === '' ? '' : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
    const name = frame.functionName || '(anonymous)';
    const key = `${name}@${where}`;
    const entry = counts.get(key) ?? { name, where, samples: 0 };
    entry.samples += 1;
    counts.set(key, entry);
  }
  return [...counts.values()]
    .sort((a, b) => b.samples - a.samples)
    .slice(0, limit)
    .map((e) => ({ share: e.samples / Math.max(1, busy), name: e.name, where: e.where }));
}

function shortUrl(url: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('node_modules/');
  if (modules >= 0) return path.slice(modules + 'node_modules/'.length);
  const dist = path.lastIndexOf('/dist/');
  return dist >= 0 ? path.slice(dist + 1) : path;
}

function printTop(title: string, top: readonly TopEntry[]): void {
  console.log(`\n${title}\n| self % | function | file |\n| ---: | --- | --- |`);
  for (const e of top) console.log(`| ${(e.share * 100).toFixed(1)} | ${e.name} | ${e.where} |`);
}

const PROMPT: ContentBlock[] = [{ type: 'text', text: 'echo hello from the bench' }];

export type ProfiledLoad = 'trivial' | 'events' | 'cluster';

export interface LoadProfile {
  readonly load: ProfiledLoad;
  /** Runs (trivial) or events (events) per second, with the profilers on. */
  readonly perSecond: number;
  /** CPU per run or event, µs. */
  readonly daemonCpuUs: number;
  readonly clientCpuUs: number;
  /** CPU per run of the nats-server (the `cluster` load only), µs. */
  readonly natsCpuUs?: number;
  readonly daemon: CpuProfile;
  readonly client: CpuProfile;
}

/**
 * Profiles both sides under `load` for `seconds`: the daemon under `--cpu-prof` (written to
 * `profDir` when it exits), this process through the inspector.
 */
export async function profileLoad(profDir: string, load: ProfiledLoad, seconds: number): Promise<LoadProfile> {
  // Its own teardown: the daemon writes its profile when it exits, before it is read below.
  const cleanup = new Cleanup();
  let measured: Omit<LoadProfile, 'daemon'>;
  try {
    const world = makeWorld(cleanup);
    const nats = load === 'cluster' ? await startNatsServer() : undefined;
    if (nats) cleanup.defer('stop nats-server', () => nats.stop());
    const config = {
      model: { default: `scripted:${world.stream}` },
      limits: { maxConcurrentRuns: load === 'cluster' ? 64 : 256, maxRunsPerConnection: 256 },
      ...(nats && { cluster: { nats: nats.url, ackWaitMs: 5000 } }),
    };
    const daemon = await daemonProcess(cleanup, config, ['--cpu-prof', '--cpu-prof-dir', profDir]);
    const connections = load === 'trivial' ? 8 : load === 'cluster' ? 4 : 1;
    const pool = await clients(cleanup, daemon.socket, connections, 'profile');
    // The cluster bench's parent: this checkout, so each start's workspace identity is a git one.
    const parent = { sessionId: 'profile', cwd: load === 'cluster' ? process.cwd() : world.workspace };
    const disposals: Promise<void>[] = [];
    const trivial = async (worker: number): Promise<void> => {
      const run = await pool[worker % connections]!.start('echo', { prompt: PROMPT, parent, signal: abortSignal() });
      await run.result;
      disposals.push(run.dispose());
    };
    let events = 0;
    const streamed = async (): Promise<void> => {
      const run = await pool[0]!.start('spawn', { prompt: PROMPT, parent, signal: abortSignal(), onEvent: () => void events++ });
      await run.result;
      await run.dispose();
    };
    const once = load === 'events' ? streamed : trivial;
    const workers = load === 'events' ? 1 : connections * 8;
    await closedLoops(workers, 500, once, () => Promise.all(disposals.splice(0)));
    events = 0;
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const daemonCpu = cpuSecondsOf(daemon.pid);
    const clientCpu = ownCpuSeconds();
    const natsCpu = nats ? cpuSecondsOf(nats.pid) : 0;
    const result = await closedLoops(workers, seconds * 1000, once, () => Promise.all(disposals.splice(0)));
    const daemonUsed = cpuSecondsOf(daemon.pid) - daemonCpu;
    const clientUsed = ownCpuSeconds() - clientCpu;
    const natsUsed = nats ? cpuSecondsOf(nats.pid) - natsCpu : 0;
    const { profile } = (await session.post('Profiler.stop')) as { profile: CpuProfile };
    session.disconnect();
    const ops = load === 'events' ? events : result.count;
    measured = {
      load,
      perSecond: (ops / result.elapsedMs) * 1000,
      daemonCpuUs: (daemonUsed / ops) * 1e6,
      clientCpuUs: (clientUsed / ops) * 1e6,
      ...(nats && { natsCpuUs: (natsUsed / ops) * 1e6 }),
      client: profile,
    };
  } finally {
    await cleanup.runAll(); // SIGTERM: the daemon exits and writes its profile
  }
  const daemonFile = readdirSync(profDir).find((name) => name.startsWith('CPU.'));
  if (!daemonFile) throw new Error('the daemon wrote no CPU profile');
  return { ...measured, daemon: JSON.parse(readFileSync(join(profDir, daemonFile), 'utf8')) as CpuProfile };
}

async function main(): Promise<void> {
  const load: ProfiledLoad = process.argv[2] === 'events' || process.argv[2] === 'cluster' ? process.argv[2] : 'trivial';
  const seconds = Number(process.argv[3] ?? 5);
  // Kept after the run (the profiles are the output), unlike the daemon's temp dirs.
  const profDir = mkdtempSync(join(tmpdir(), 'subagentd-profile-'));
  {
    const measured = await profileLoad(profDir, load, seconds);
    const unit = load === 'events' ? 'event' : 'run';
    // CPU per operation moves far less with the machine's load than a rate does.
    console.log(
      `${load}: ${Math.round(measured.perSecond)} ${unit}s/s over ${seconds} s; CPU per ${unit}: daemon ${measured.daemonCpuUs.toFixed(1)} µs, ` +
        `client ${measured.clientCpuUs.toFixed(1)} µs${measured.natsCpuUs === undefined ? '' : `, nats-server ${measured.natsCpuUs.toFixed(1)} µs`} (profiler on); load average ${formatLoad()}`,
    );
    writeFileSync(join(profDir, 'client.cpuprofile'), JSON.stringify(measured.client));
    printTop('client (this process), top self time', topSelfTime(measured.client, 15));
    printTop('daemon process, top self time', topSelfTime(measured.daemon, 15));
  }
  console.log(`\nprofiles: ${profDir}`);
}

// Run as a script (`node dist/bench/profile.js`), not when the bench imports profileLoad.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
