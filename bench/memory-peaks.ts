/**
 * The daemon's true peak memory in the two cases docs/security.md bounds at +64 MiB over idle:
 *
 * - flood: an ACP agent replies with 50 MiB of text while its client streams the run's events;
 * - non-readers: 5 clients start a run each (an ACP agent replying with 20 MiB, streamed) and
 *   never read a byte.
 *
 * Each case gets a fresh daemon with default limits: a warm-up run (code loaded, an agent
 * spawned), its idle VmRSS, then the case, then VmHWM: the kernel's peak over the process's whole
 * life, so nothing between two samples is missed and nothing is reset. Start-up's own peak is
 * under the idle RSS of a warmed daemon, so it cannot pass for the case's.
 *
 * `node dist/bench/memory-peaks.js [flood|non-readers] [--repo DIR] [--mib N] [--clients N]` runs it alone;
 * `--repo` measures another checkout's build (its dist/cli/main.js) with this one's clients.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type RemoteSubagentService } from '../client/index.js';
import { RawClient } from './raw-client.js';

// This file runs from dist/bench/ (the bench) or from bench/ (a test): the checkout is above either.
const UP = resolve(import.meta.dirname, '..');
const HERE = basename(UP) === 'dist' ? dirname(UP) : UP;
const MIB = 1024 * 1024;

export interface MemoryPeak {
  readonly scenario: string;
  /** VmRSS of the warmed, idle daemon. */
  readonly idle: number;
  /** VmHWM at the end: the process's peak RSS. */
  readonly peak: number;
  /** What the case's clients received (streamed text, or bytes off the socket before the cut). */
  readonly received: number;
}

export interface MemoryPeakOptions {
  /** The checkout whose build runs the daemon (default: this one). */
  readonly repo?: string;
  /** Extra daemon config (limits). */
  readonly config?: Record<string, unknown>;
}

export function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`)) ?? '';
  return Number(/(\d+)/.exec(line)?.[1] ?? 0) * 1024;
}

/** A flooding ACP agent as a provider named `flood-BYTES`. */
function floodAgent(bytes: number): Record<string, unknown> {
  return {
    type: 'acp',
    name: `flood-${bytes}`,
    command: process.execPath,
    args: [join(HERE, 'test', 'fixtures', 'acp-raw-agent.mjs')],
    env: { RAW_FLOOD_BYTES: String(bytes) },
  };
}

const WARM_BYTES = 64 * 1024;

/** A fresh daemon serving flood agents of these sizes, warmed by one streamed run; `body` gets it idle. */
async function withWarmDaemon<T>(sizes: readonly number[], options: MemoryPeakOptions, body: (d: { pid: number; socket: string; service: RemoteSubagentService; dir: string }) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-mempeak-'));
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ ...options.config, providers: [WARM_BYTES, ...sizes].map(floodAgent) }));
  const main = join(options.repo ?? HERE, 'dist', 'cli', 'main.js');
  const env = { ...process.env };
  for (const key of ['DEEPSEEK_API_KEY', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'SUBAGENTD_MODEL', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_EXPORTER']) delete env[key];
  const daemon = spawn(process.execPath, [main, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config], { stdio: 'ignore', env });
  let service: RemoteSubagentService | undefined;
  try {
    for (let i = 0; i < 400 && !(existsSync(`${socket}.token`) && existsSync(socket)); i++) await new Promise((r) => setTimeout(r, 50));
    if (daemon.exitCode !== null) throw new Error(`the daemon (${main}) exited at start with code ${daemon.exitCode}`);
    service = await connect({ socket });
    await streamRun(service, `flood-${WARM_BYTES}`, dir);
    return await body({ pid: daemon.pid!, socket, service, dir });
  } finally {
    await service?.close();
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One run that streams its events to this client; returns the text it streamed. */
async function streamRun(service: RemoteSubagentService, provider: string, cwd: string): Promise<number> {
  let streamed = 0;
  const run = await service.start(provider, {
    prompt: [{ type: 'text', text: 'go' }],
    signal: new AbortController().signal,
    parent: { sessionId: 'mempeak', cwd },
    onEvent: (event) => {
      if (event.kind === 'text-delta') streamed += Buffer.byteLength(event.text);
    },
  });
  await run.result;
  await run.dispose();
  return streamed;
}

/** A child floods `mib` MiB of output to a client that streams it. */
export function floodPeak(mib = 50, options: MemoryPeakOptions = {}): Promise<MemoryPeak> {
  const bytes = mib * MIB;
  return withWarmDaemon([bytes], options, async ({ pid, service, dir }) => {
    const idle = procStatus(pid, 'VmRSS');
    const received = await streamRun(service, `flood-${bytes}`, dir);
    return { scenario: `${mib} MiB of child output, streamed`, idle, peak: procStatus(pid, 'VmHWM'), received };
  });
}

/** `clients` clients each start a run streaming `mib` MiB and never read. */
export function nonReadersPeak(clients = 5, mib = 20, options: MemoryPeakOptions = {}): Promise<MemoryPeak> {
  const bytes = mib * MIB;
  return withWarmDaemon([bytes], options, async ({ pid, socket, service, dir }) => {
    const idle = procStatus(pid, 'VmRSS');
    const peers: RawClient[] = [];
    try {
      for (let i = 0; i < clients; i++) {
        const peer = await RawClient.initialized(socket);
        peer.pause();
        peer.send('subagent/start', { provider: `flood-${bytes}`, prompt: [{ type: 'text', text: 'go' }], parent: { sessionId: `never-reads-${i}`, cwd: dir }, stream: true });
        peers.push(peer);
      }
      // Until every run ended (cut off or not, the agent's reply is read to its end) and nobody is left unserved.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const { runs } = await service.ops.status();
        const listed = (await service.ops.runs()).filter((r) => r.provider === `flood-${bytes}`).length;
        if (runs.starting === 0 && runs.running === 0 && listed >= clients) break;
        if (Date.now() > deadline) throw new Error('the non-readers\u2019 runs did not end within 120 s');
        await new Promise((r) => setTimeout(r, 200));
      }
      const peak = procStatus(pid, 'VmHWM');
      return { scenario: `${clients} clients that never read × ${mib} MiB streamed`, idle, peak, received: peers.reduce((n, p) => n + p.bytesIn, 0) };
    } finally {
      for (const peer of peers) peer.close();
    }
  });
}

export const mib = (n: number): string => `${(n / MIB).toFixed(1)} MiB`;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { repo: { type: 'string' }, mib: { type: 'string' }, clients: { type: 'string' } } });
  const options = values.repo === undefined ? {} : { repo: resolve(values.repo) };
  const which = positionals[0];
  const results: MemoryPeak[] = [];
  if (which === undefined || which === 'flood') results.push(await floodPeak(Number(values.mib ?? 50), options));
  if (which === undefined || which === 'non-readers') results.push(await nonReadersPeak(Number(values.clients ?? 5), Number(values.mib ?? 20), options));
  for (const r of results) console.log(`${r.scenario}: idle ${mib(r.idle)}, peak ${mib(r.peak)}, growth +${mib(r.peak - r.idle)} (received ${mib(r.received)})`);
}
