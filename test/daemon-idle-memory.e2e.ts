/**
 * An idle daemon's memory, in a real daemon process (the built CLI, fixture providers):
 * - V8's optimizing compiler is held while the daemon loads (nothing is optimized by the time it
 *   accepts connections: `--trace-opt` prints every optimization) and let go once it serves (a
 *   burst of runs gets its hot code optimized);
 * - the daemon gives memory back before it serves and again once a busy spell is over (its
 *   debug log says so, with the RSS before and after).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';

const OPTIMIZED = /completed optimizing .*TURBOFAN/;
const optimizations = (daemon: DaemonProcess): string[] => daemon.stdout().split('\n').filter((line) => OPTIMIZED.test(line));

interface Release {
  readonly when: string;
  readonly rssBefore: number;
  readonly rssAfter: number;
}

function releases(daemon: DaemonProcess): Release[] {
  const log = readFileSync(join(daemon.stateDir, 'daemon.log'), 'utf8');
  return log
    .split('\n')
    .filter((line) => line.includes('"memory released"'))
    .map((line) => JSON.parse(line) as Release);
}

let daemon: DaemonProcess;
let optimizedAtAccept: string[];
let service: RemoteSubagentService | undefined;

beforeAll(async () => {
  daemon = await startDaemon({}, ['--log-level', 'debug'], { nodeArgs: ['--trace-opt'] });
  optimizedAtAccept = optimizations(daemon);
}, 20_000);

afterAll(async () => {
  await service?.close();
  await daemon?.stop();
});

it('has optimized nothing by the time it accepts, and has released memory once, at start', async () => {
  expect(optimizedAtAccept).toEqual([]);
  // The log file is written once per event-loop turn, so the line may land just after accepting.
  await waitFor(() => releases(daemon).length > 0, 10_000, () => 'no memory release logged at start');
  const atStart = releases(daemon);
  expect(atStart.map((release) => release.when)).toEqual(['start']);
  expect(atStart[0]!.rssAfter).toBeGreaterThan(0);
});

it('optimizes serving code once busy, then gives memory back when the burst is over', async () => {
  service = await connect({ socket: daemon.socket, clientInfo: { name: 'idle-memory-test', version: '0' } });
  const parent = { sessionId: 'idle-memory', cwd: daemon.dir };
  for (let i = 0; i < 400; i++) {
    const run = await service.start('echo', { prompt: [{ type: 'text', text: `echo ${i}` }], parent, signal: new AbortController().signal });
    await run.result;
    await run.dispose();
  }
  // Compiled on a background thread: it lands shortly after the code got hot.
  await waitFor(() => optimizations(daemon).length > 0, 10_000, () => 'no optimization after 400 runs');
  // The connection stays open: a quiet client does not keep the memory held.
  await waitFor(() => releases(daemon).some((release) => release.when === 'idle'), 15_000, () => `no idle release: ${JSON.stringify(releases(daemon))}`);
}, 40_000);
