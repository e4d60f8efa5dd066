/**
 * A client that pipelines requests and never reads the answers. Streamed progress to a slow
 * reader is coalesced and bounded, and a reader that falls 4096 notifications behind is cut
 * off — but answers to requests bypass that accounting. Here one paused socket sends 4000
 * small `runs/list` requests (≈ 300 KiB in) whose answers (≈ 95 KiB each) it never reads: the
 * daemon's memory must stay bounded (< +100 MiB), by cutting the client off or by no longer
 * reading from it, while a bystander keeps being served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { cpuTimeMs, frame, isAlive, rssMiB, sleep, startLoadDaemon, waitCpuQuiet, type LoadDaemon, runCleanups } from './support/load-daemon.js';
import { RawPeer } from './support/raw-peer.js';

const parent = { sessionId: 'pipelining', cwd: '/tmp' };
const text = (t: string) => [{ type: 'text' as const, text: t }];
const figures: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
let daemon: LoadDaemon;
let bystander: RemoteSubagentService;

beforeAll(async () => {
  daemon = await startLoadDaemon({ detachGraceMs: 0 });
  cleanups.push(() => daemon.stop());
  bystander = await connect({ socket: daemon.socket, clientInfo: { name: 'bystander', version: '0' }, requestTimeoutMs: 10_000 });
  cleanups.push(() => bystander.close());
});

afterAll(async () => {
  await runCleanups(cleanups);
  if (figures.length > 0) console.log(`[faults-pipelining]\n  ${figures.join('\n  ')}`);
});

describe('a client that stops reading while it pipelines requests', () => {
  it('cannot make the daemon hold its unread answers without bound', async () => {
    // Give runs/list something to say: 300 settled runs.
    const filler = await RawPeer.initialized(daemon.socket, 'filler');
    cleanups.push(() => filler.close());
    // String ids: RawPeer.request numbers its own from 1.
    for (let i = 0; i < 300; i++) {
      filler.send({ jsonrpc: '2.0', id: `fill-${i}`, method: 'subagent/start', params: { provider: 'echo', prompt: text(`echo filler ${i}`), parent } });
    }
    await filler.waitFor((m) => m.id === 'fill-299', 10_000, 'the filler runs');
    const listed = await filler.request('runs/list', {});
    expect((listed.result as { runs: unknown[] }).runs.length).toBeGreaterThanOrEqual(300);
    const answerBytes = JSON.stringify(listed).length;
    filler.close();

    const REQUESTS = 4000;
    const base = rssMiB(daemon.pid);
    const cpu0 = cpuTimeMs(daemon.pid);
    const peer = await RawPeer.initialized(daemon.socket, 'pipeliner');
    cleanups.push(() => peer.close());
    peer.socket.pause();
    // RSS over time, every 500 ms, while the daemon works through the requests.
    const timeline: string[] = [];
    let peak = base;
    let sampling = true;
    const t0 = performance.now();
    const sampler = (async () => {
      for (let i = 0; sampling && i < 60; i++) {
        await sleep(500);
        if (!isAlive(daemon.pid)) break;
        const rss = rssMiB(daemon.pid);
        peak = Math.max(peak, rss);
        timeline.push(`${((performance.now() - t0) / 1000).toFixed(1)}s +${(rss - base).toFixed(0)}`);
      }
    })();
    for (let i = 0; i < REQUESTS; i += 100) {
      const batch = Array.from({ length: 100 }, (_, j) => frame({ jsonrpc: '2.0', id: 10_000 + i + j, method: 'runs/list', params: {} }));
      peer.writeRaw(Buffer.concat(batch));
      await sleep(5);
    }
    // The bystander is still served while the daemon works through them.
    const t = performance.now();
    const run = await bystander.start('echo', { prompt: text('echo still here'), parent, signal: AbortSignal.timeout(10_000) });
    expect((await run.result).stopReason).toBe('completed');
    await run.dispose();
    const bystanderMs = performance.now() - t;

    // Wait until the daemon has read and answered (or refused) everything it is going to.
    const quiet = await waitCpuQuiet(daemon.pid, 12_000);
    sampling = false;
    await sampler;
    peak = Math.max(peak, rssMiB(daemon.pid));
    const cpu = cpuTimeMs(daemon.pid) - cpu0;
    const cutOff = peer.closed;
    figures.push(
      `${REQUESTS} runs/list requests (~${Math.round((REQUESTS * 75) / 1024)} KiB in) × ~${(answerBytes / 1024).toFixed(0)} KiB answers = ` +
        `~${((REQUESTS * answerBytes) / 1048576).toFixed(0)} MiB never read; daemon RSS ${base.toFixed(0)} → ${peak.toFixed(0)} MiB ` +
        `(${timeline.join(', ')}); CPU ${cpu.toFixed(0)} ms; ` +
        `${cutOff ? 'connection cut off' : 'connection still open'}${quiet ? '' : ', daemon still busy after 12 s'}; bystander run ${bystanderMs.toFixed(0)} ms`,
    );
    expect(isAlive(daemon.pid)).toBe(true);
    expect(peak - base, `RSS ${base.toFixed(0)} → ${peak.toFixed(0)} MiB holding answers for a client that does not read`).toBeLessThan(100);
  }, 30_000);
});
