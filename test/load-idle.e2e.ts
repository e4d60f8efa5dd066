/**
 * Idle connections cost the daemon nothing: 200 initialized clients held open leave its CPU flat
 * (sampled from /proc/<pid>/stat over 2 s), status counts them, and closing them all brings the
 * connection count and the daemon's open file descriptors back down.
 */
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { cpuTimeMs, pollUntil, rssMiB, sleep, startLoadDaemon, type LoadDaemon } from './support/load-daemon.js';

const IDLE = 200;
const SAMPLE_MS = 2000;
/** 5% of one core over the sample. */
const MAX_CPU_SHARE = 0.05;

const figures: string[] = [];
let daemon: LoadDaemon;
const open: RemoteSubagentService[] = [];

beforeAll(async () => {
  daemon = await startLoadDaemon({ detachGraceMs: 0 });
});

afterAll(async () => {
  await Promise.allSettled(open.map((c) => c.close()));
  await daemon?.stop();
  if (figures.length > 0) console.log(`[load-idle]\n  ${figures.join('\n  ')}`);
});

const fdCount = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

function client(name: string): Promise<RemoteSubagentService> {
  return connect({
    socket: daemon.socket,
    clientInfo: { name, version: '0' },
    requestTimeoutMs: 10_000,
    logger: { error: (message, error) => console.error(`[${name}] ${message}`, error ?? '') },
  });
}

describe(`${IDLE} idle connections`, () => {
  it('keep the daemon near idle, are counted, and are released when closed', async () => {
    const monitor = await client('monitor');
    open.push(monitor);
    const fdsBefore = fdCount(daemon.pid);
    const rssBefore = rssMiB(daemon.pid);

    const t0 = performance.now();
    const idle: RemoteSubagentService[] = [];
    for (let batch = 0; batch < IDLE / 25; batch++) {
      const opened = await Promise.all(Array.from({ length: 25 }, (_, i) => client(`idle-${batch * 25 + i}`)));
      idle.push(...opened);
      open.push(...opened);
    }
    const openMs = performance.now() - t0;

    const busy = await monitor.ops.status();
    expect(busy.connections).toBeGreaterThanOrEqual(IDLE + 1);
    expect(fdCount(daemon.pid)).toBeGreaterThanOrEqual(fdsBefore + IDLE);

    // Let the handshakes' aftermath (GC, log writes) pass, then measure the daemon alone.
    await sleep(300);
    const cpu0 = cpuTimeMs(daemon.pid);
    const wall0 = performance.now();
    await sleep(SAMPLE_MS);
    const cpuMs = cpuTimeMs(daemon.pid) - cpu0;
    const wallMs = performance.now() - wall0;
    const share = cpuMs / wallMs;
    const rssOpen = rssMiB(daemon.pid);
    expect(share, `daemon used ${cpuMs} ms CPU in ${wallMs.toFixed(0)} ms with ${IDLE} idle connections`).toBeLessThan(MAX_CPU_SHARE);

    // The idle clients still work after sitting there.
    const probe = await idle[IDLE - 1]!.ops.status();
    expect(probe.connections).toBeGreaterThanOrEqual(IDLE + 1);

    await Promise.all(idle.map((c) => c.close()));
    const after = await pollUntil(() => monitor.ops.status(), (s) => s.connections === 1, 5000, 'the connections to drop');
    expect(after.connections).toBe(1);
    // Sockets are destroyed at most ~1 s after close (end, then destroy for a peer that never reads).
    await pollUntil(() => fdCount(daemon.pid), (n) => n <= fdsBefore + 5, 5000, 'the daemon to release the sockets');

    figures.push(
      `opened ${IDLE} connections in ${openMs.toFixed(0)} ms; idle CPU ${cpuMs.toFixed(0)} ms over ${wallMs.toFixed(0)} ms = ${(share * 100).toFixed(2)}% of one core`,
      `daemon RSS ${rssBefore.toFixed(0)} MiB → ${rssOpen.toFixed(0)} MiB with ${IDLE} open (${(((rssOpen - rssBefore) * 1024) / IDLE).toFixed(0)} KiB each); fds ${fdsBefore} → ≥${fdsBefore + IDLE} → ${fdCount(daemon.pid)}`,
    );
  }, 30_000);
});
