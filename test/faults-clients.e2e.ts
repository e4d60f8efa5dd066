/**
 * Misbehaving clients against one real daemon, while a well-behaved bystander keeps being served:
 * a client process SIGKILLed mid-run (its runs are disposed after detachGraceMs, not before); a
 * client that stops reading while its runs stream (memory stays bounded); a client that stops
 * reading while it pipelines requests; a flood of malformed frames, then garbage framing; and a
 * daemon frozen with SIGSTOP (a client with a request timeout gets DAEMON_UNRESPONSIVE in time).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { REPO } from './support/daemon-process.js';
import { cpuTimeMs, frame, isAlive, peakRssFrom, pollUntil, rssMiB, sleep, startLoadDaemon, writeScript, type LoadDaemon, runCleanups } from './support/load-daemon.js';
import { RawPeer } from './support/raw-peer.js';

const CHILD_CLIENT = join(REPO, 'dist', 'test', 'support', 'load-child-client.js');
const GRACE_MS = 1500;
const parent = { sessionId: 'faults', cwd: '/tmp' };
const text = (t: string) => [{ type: 'text' as const, text: t }];

const figures: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
let daemon: LoadDaemon;
let bystander: RemoteSubagentService;
let work: string;

beforeAll(async () => {
  if (!existsSync(CHILD_CLIENT)) throw new Error(`build first: ${CHILD_CLIENT} is missing (npx tsc -p .)`);
  work = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'subagentd-faults-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  // Runs may stream up to 16 MiB here (the default cap is 2 MiB), so a client that does not read
  // meets the write backlog's bound (its progress part is 1/8 of 16 MiB) before its run's stream is cut.
  daemon = await startLoadDaemon({ detachGraceMs: GRACE_MS, limits: { maxOutputBytes: 16 * 1024 * 1024 } });
  cleanups.push(() => daemon.stop());
  bystander = await connect({ socket: daemon.socket, clientInfo: { name: 'bystander', version: '0' }, requestTimeoutMs: 10_000 });
  cleanups.push(() => bystander.close());
});

afterAll(async () => {
  await runCleanups(cleanups);
  if (figures.length > 0) console.log(`[faults-clients]\n  ${figures.join('\n  ')}`);
});

/** The bystander completes `count` echo runs; returns the slowest round trip in ms. */
async function bystanderServed(count: number): Promise<number> {
  let slowest = 0;
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    const run = await bystander.start('echo', { prompt: text(`echo bystander ${i}`), parent, signal: AbortSignal.timeout(10_000) });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.output).toEqual(text(`echo bystander ${i}`));
    await run.dispose();
    slowest = Math.max(slowest, performance.now() - t);
  }
  return slowest;
}

async function fixtureStats(): Promise<{ started: number; disposed: number }> {
  const run = await bystander.start('echo', { prompt: text('stats'), parent, signal: AbortSignal.timeout(10_000) });
  const result = await run.result;
  await run.dispose();
  const first = result.output[0];
  return JSON.parse(first?.type === 'text' ? first.text : '{}') as { started: number; disposed: number };
}


describe('a client process killed mid-run', () => {
  it('leaves its runs detached for detachGraceMs, then they are disposed; others keep working', async () => {
    const statsBefore = await fixtureStats();
    const child: ChildProcess = spawn(process.execPath, [CHILD_CLIENT, daemon.socket, '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const line = await pollUntil(() => out, (o) => o.includes('\n') || child.exitCode !== null, 10_000, 'the child client to start its runs');
    expect(child.exitCode, err).toBeNull();
    const { runIds } = JSON.parse(line.split('\n')[0]!) as { runIds: string[] };
    expect(runIds).toHaveLength(3);

    const before = await bystander.ops.status();
    expect(before.runs.running).toBe(3);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    const killedAt = performance.now();
    await exited;

    // The daemon notices the dead peer at once…
    await pollUntil(() => bystander.ops.status(), (s) => s.connections === before.connections - 1, 3000, 'the connection to close');
    const noticedMs = performance.now() - killedAt;
    // …but keeps its runs for the grace period (a reconnecting client could re-attach them).
    const during = await bystander.ops.status();
    const checkedAtMs = performance.now() - killedAt;
    if (checkedAtMs < GRACE_MS - 200) expect(during.runs.running, 'runs are kept during the grace period').toBe(3);
    // The other client is served meanwhile.
    const slowest = await bystanderServed(10);

    const after = await pollUntil(() => bystander.ops.status(), (s) => s.runs.running === 0, GRACE_MS + 5000, 'the detached runs to be disposed');
    const disposedMs = performance.now() - killedAt;
    expect(disposedMs, 'disposed no earlier than the grace period').toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(after.admission.running).toBe(0);
    const infos = (await bystander.ops.runs()).filter((r) => runIds.includes(r.runId));
    expect(infos.map((r) => [r.state, r.stopReason])).toEqual(runIds.map(() => ['disposed', 'aborted']));
    // The provider's dispose really ran for each of them.
    expect((await fixtureStats()).disposed).toBeGreaterThanOrEqual(statsBefore.disposed + 3);

    figures.push(
      `killed client: connection closed after ${noticedMs.toFixed(0)} ms, runs disposed after ${disposedMs.toFixed(0)} ms (grace ${GRACE_MS}); ` +
        `bystander's slowest run meanwhile ${slowest.toFixed(0)} ms`,
    );
  }, 20_000);
});

describe('a client that stops reading', () => {
  it('while its runs stream: the daemon’s memory stays bounded and others are served', async () => {
    const workspace = join(work, 'ws-stream');
    mkdirSync(workspace);
    writeFileSync(join(workspace, 'a.txt'), 'x');
    const STEPS = 40;
    const RUNS = 8;
    const chunk = 'lorem ipsum dolor sit amet '.repeat(1200); // ~32 KiB per step
    const script = writeScript(work, 'long-stream', {
      steps: [
        ...Array.from({ length: STEPS - 1 }, (_, i) => ({
          text: `${i} ${chunk}`,
          reasoning: 'thinking '.repeat(200),
          toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }],
        })),
        { text: 'the end', finish: 'stop' },
      ],
    });
    // Warm the spawn path up first, so the baseline includes what any spawn run loads.
    const warm = await bystander.start('spawn', {
      prompt: text('warm up'),
      parent: { sessionId: 'warm', cwd: workspace },
      agentOptions: { model: `scripted:${script}` },
      signal: AbortSignal.timeout(20_000),
    });
    expect((await warm.result).stopReason).toBe('completed');
    await warm.dispose();

    const base = rssMiB(daemon.pid);
    const sampler = peakRssFrom(daemon.pid);
    const peer = await RawPeer.initialized(daemon.socket, 'stops-reading');
    cleanups.push(() => peer.close());
    peer.socket.pause();
    for (let i = 0; i < RUNS; i++) {
      peer.send({
        jsonrpc: '2.0',
        id: 100 + i,
        method: 'subagent/start',
        params: {
          provider: 'spawn',
          prompt: text(`stream ${i}`),
          parent: { sessionId: `stream-${i}`, cwd: workspace },
          agentOptions: { model: `scripted:${script}` },
          stream: true,
        },
      });
    }
    // Meanwhile the bystander is served, and all those runs finish.
    const slowest = await bystanderServed(10);
    // The non-reader never disposes them, so its runs stay 'settled' (the warm-up run is disposed).
    await pollUntil(() => bystander.ops.runs({ provider: 'spawn', state: 'settled' }), (runs) => runs.length >= RUNS, 20_000, 'the streaming runs to settle');
    await pollUntil(() => bystander.ops.status(), (s) => s.runs.running === 0 && s.runs.starting === 0, 5000, 'nothing running');
    const peak = sampler.stop();
    expect(isAlive(daemon.pid)).toBe(true);
    expect(peak - base, `RSS ${base.toFixed(0)} → peak ${peak.toFixed(0)} MiB`).toBeLessThan(100);

    // Reading again: lifecycle is never dropped, so every start has its answer and its end —
    // unless the daemon cut the connection off as not reading, which is also bounded behaviour.
    peer.socket.resume();
    let complete = false;
    if (!peer.closed) {
      await pollUntil(() => peer.notifications('subagent/end').length, (n) => n >= RUNS || peer.closed, 10_000, 'the subagent/end of every run');
      complete = !peer.closed;
    }
    const progress = peer.runEvents().length;
    if (complete) {
      for (let i = 0; i < RUNS; i++) expect(peer.messages.find((m) => m.id === 100 + i)?.result, `start ${i}`).toBeDefined();
      const ends = peer.notifications('subagent/end').map((m) => (m.params as { stopReason: string }).stopReason);
      expect(ends).toEqual(Array.from({ length: RUNS }, () => 'completed'));
    }
    figures.push(
      `non-reading client, ${RUNS} runs × ${STEPS} steps streaming (~${((RUNS * STEPS * chunk.length * 2) / 1048576).toFixed(0)} MiB of progress): ` +
        `RSS ${base.toFixed(0)} → peak ${peak.toFixed(0)} MiB; after reading again: ${progress} run events, ` +
        `${complete ? 'every end delivered' : 'connection was cut off'}; bystander's slowest run ${slowest.toFixed(0)} ms`,
    );
    peer.close();
  }, 40_000);
});

describe('clients that never read', () => {
  it('5 of them, each streaming 20 MiB: each is cut off at the byte bound with a logged reason; RSS grows under 64 MiB', async () => {
    const CLIENTS = 5;
    const DELTAS = 80;
    const SIZE = 256 * 1024; // 80 × 256 KiB = 20 MiB per client
    const start = (peer: RawPeer, id: number, prompt: string): void =>
      peer.send({ jsonrpc: '2.0', id, method: 'subagent/start', params: { provider: 'echo', prompt: text(prompt), parent, stream: true } });
    const connections = (await bystander.ops.status()).connections;
    // Warm the path up with a client that reads, so the baseline holds what any stream loads.
    const warm = await RawPeer.initialized(daemon.socket, 'warm-reader');
    start(warm, 1, `stream 8 ${SIZE}`);
    await warm.waitFor((m) => m.method === 'subagent/end', 10_000, 'the warm-up end');
    warm.close();
    await pollUntil(() => bystander.ops.status(), (s) => s.runs.running === 0 && s.connections === connections, 5000, 'a quiet daemon');

    const base = rssMiB(daemon.pid);
    const sampler = peakRssFrom(daemon.pid);
    const peers: RawPeer[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const peer = await RawPeer.initialized(daemon.socket, `never-reads-${i}`);
      cleanups.push(() => peer.close());
      peer.socket.pause();
      start(peer, 100 + i, `stream ${DELTAS} ${SIZE}`);
      peers.push(peer);
    }
    const slowest = await bystanderServed(5);
    await pollUntil(() => bystander.ops.status(), (s) => s.connections === connections, 20_000, 'the non-readers to be cut off');
    await pollUntil(() => bystander.ops.status(), (s) => s.runs.running === 0, 20_000, 'their runs to end');
    const peak = sampler.stop();
    expect(isAlive(daemon.pid)).toBe(true);
    const logFile = join(daemon.fastDir ? join(daemon.fastDir, 'state') : daemon.stateDir, 'daemon.log');
    const reasons = await pollUntil(
      () => readFileSync(logFile, 'utf8').split('\n').filter((l) => /never-reads-/.test(l) && /client stopped reading/.test(l)),
      (lines) => lines.length >= CLIENTS,
      5000,
      'a logged reason for each cut-off',
    );
    expect(reasons).toHaveLength(CLIENTS);
    expect(peak - base, `RSS ${base.toFixed(0)} → peak ${peak.toFixed(0)} MiB`).toBeLessThan(64);
    for (const peer of peers) peer.close();
    figures.push(
      `${CLIENTS} non-reading clients × ${(DELTAS * SIZE) / 1048576} MiB streamed: all ${CLIENTS} cut off at the byte bound; ` +
        `RSS ${base.toFixed(0)} → peak ${peak.toFixed(0)} MiB (+${(peak - base).toFixed(0)}); bystander's slowest run ${slowest.toFixed(0)} ms; ` +
        `reason: ${/"reason":"([^"]+)"/.exec(reasons[0] ?? '')?.[1] ?? '?'}`,
    );
  }, 60_000);
});

describe('a flood of malformed frames', () => {
  it('gets one parse error per frame, then garbage framing closes only that connection; others complete runs throughout', async () => {
    const FRAMES = 5000;
    const flooder = await RawPeer.initialized(daemon.socket, 'flooder');
    cleanups.push(() => flooder.close());
    const bodies = ['{bad', '{"jsonrpc":"2.0","id":', '\u00ff\u00fe', 'nul\u0000l', '[1,2', '{"a":1}}', '"unterminated', '{"x":tru}'];
    const connections = (await bystander.ops.status()).connections;

    const cpu0 = cpuTimeMs(daemon.pid);
    const t0 = performance.now();
    const served = bystanderServed(30);
    for (let i = 0; i < FRAMES; i += 500) {
      const batch: Buffer[] = [];
      for (let j = i; j < i + 500; j++) batch.push(frame(Buffer.from(`${bodies[j % bodies.length]!}${j}`, 'utf8')));
      flooder.writeRaw(Buffer.concat(batch));
      await sleep(1);
    }
    await flooder.waitFor(() => flooder.messages.length >= FRAMES + 1, 15_000, `${FRAMES} parse errors`);
    const floodMs = performance.now() - t0;
    const floodCpu = cpuTimeMs(daemon.pid) - cpu0;
    const errors = flooder.messages.slice(1);
    expect(errors).toHaveLength(FRAMES);
    expect(errors.every((m) => m.id === null && m.error?.code === -32700)).toBe(true);
    // Sound framing, bad bodies: the connection is still usable.
    expect((await flooder.request('providers/list', {})).result).toBeDefined();

    // Now bytes that cannot be framed: the daemon says why and closes this connection only.
    flooder.writeRaw('THIS IS NOT A HEADER\r\n\r\n{}');
    await flooder.whenClosed;
    const farewell = flooder.messages.find((m) => m.id === null && m.error?.code === -32600);
    expect(farewell?.error?.message).toMatch(/closing/);

    const slowest = await served;
    // Served throughout, if slowly: a starved bystander would have timed out its 10 s runs.
    expect(slowest).toBeLessThan(10_000);
    await pollUntil(() => bystander.ops.status(), (s) => s.connections === connections - 1, 3000, 'the flooder to be gone');
    expect(isAlive(daemon.pid)).toBe(true);
    await bystanderServed(2);
    figures.push(
      `malformed flood: ${FRAMES} bad frames answered in ${floodMs.toFixed(0)} ms (daemon CPU ${floodCpu.toFixed(0)} ms incl. the bystander's 30 runs); ` +
        `bystander's slowest run meanwhile ${slowest.toFixed(0)} ms`,
    );
  }, 30_000);
});

describe('a daemon frozen with SIGSTOP', () => {
  it('a client with requestTimeoutMs 500 gets DAEMON_UNRESPONSIVE in time, and recovers after SIGCONT', async () => {
    const client = await connect({ socket: daemon.socket, clientInfo: { name: 'impatient', version: '0' }, requestTimeoutMs: 500 });
    cleanups.push(() => client.close());
    expect((await client.ops.status()).daemon.pid).toBe(daemon.pid);

    process.kill(daemon.pid, 'SIGSTOP');
    let elapsed: number;
    let error: unknown;
    try {
      await pollUntil(() => /^State:\s+T/m.test(readStatus(daemon.pid)), (stopped) => stopped, 2000, 'the daemon to stop');
      const t = performance.now();
      error = await client.ops.status().then(
        () => undefined,
        (e: unknown) => e,
      );
      elapsed = performance.now() - t;
    } finally {
      process.kill(daemon.pid, 'SIGCONT');
    }
    expect(error).toBeInstanceOf(SubagentError);
    expect((error as SubagentError).code).toBe('DAEMON_UNRESPONSIVE');
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(1500);
    // An unresponsive daemon is not a lost one: the connection is kept and works again.
    expect(client.disconnected).toBeUndefined();
    const again = await pollUntil(
      () => client.ops.status().catch(() => undefined),
      (s) => s !== undefined,
      5000,
      'the daemon to answer again',
    );
    expect(again?.daemon.pid).toBe(daemon.pid);
    await bystanderServed(1);
    figures.push(`SIGSTOP: DAEMON_UNRESPONSIVE after ${elapsed.toFixed(0)} ms (timeout 500 ms); answers again after SIGCONT`);
  }, 20_000);
});

function readStatus(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return '';
  }
}
