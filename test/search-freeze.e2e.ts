/**
 * A child's `search_text` must not freeze the shared daemon: a real daemon process, a scripted
 * child searching `(.*a){20}$` over ~8 MiB of lines that take a backtracking engine seconds
 * each (and the slowest pattern we found for RE2 too, so the search outlasts the bystander),
 * and a bystander client on another connection. The assertions are on order (every bystander
 * request answered while the search still ran, the search ended by the cancel) and on the
 * daemon's exit on SIGTERM with a FIFO in the workspace; the latencies are printed, not asserted
 * (docs/security.md records them).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService, RunEvent, SessionEvent } from '../client/index.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';

const BYSTANDER_REQUESTS = 100;
const EVIL_LINE = `${'a'.repeat(30)}!\n`;
const EVIL_PATTERN = '(.*a){20}$';

let daemon: DaemonProcess;
let workspace: string;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  daemon = await startE2eDaemon({ detachGraceMs: 0 });
  workspace = mkdtempSync(join(tmpdir(), 'subagentd-e2e-regex-'));
  // Just under the search's 1 MiB per-file bound, so every file is searched.
  for (let i = 0; i < 8; i++) writeFileSync(join(workspace, `evil-${i}.txt`), EVIL_LINE.repeat(32_000));
  writeFileSync(join(workspace, 'notes.txt'), 'the needle\n');
  execFileSync('mkfifo', [join(workspace, 'pipe')]);
});

afterAll(async () => {
  await daemon?.stop();
  if (workspace) rmSync(workspace, { recursive: true, force: true });
});

afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
});

function scripted(steps: unknown[]): string {
  const path = join(workspace, `.script-${steps.length}-${Date.now()}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

/** Sequential `providers/list` round trips from one client, in ms, sorted. */
async function timedRequests(client: RemoteSubagentService): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < BYSTANDER_REQUESTS; i++) {
    const t0 = performance.now();
    await client.refreshProviders();
    latencies.push(performance.now() - t0);
  }
  return latencies.sort((a, b) => a - b);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

describe('search_text on a shared daemon', () => {
  it('answers another client throughout a catastrophic search, and the cancel stops it', async () => {
    const owner = await clients.connect(daemon.socket);
    const bystander = await clients.connect(daemon.socket);
    const idle = await timedRequests(bystander);
    const events: SessionEvent[] = [];
    let searching!: () => void;
    const searchStarted = new Promise<void>((resolve) => (searching = resolve));
    const controller = new AbortController();
    const run = runs.track(
      (await owner.start('spawn', {
        prompt: [{ type: 'text', text: 'search' }],
        parent: { sessionId: 'regex-e2e', cwd: workspace },
        signal: controller.signal,
        agentOptions: {
          model: scripted([{ toolCalls: [{ name: 'search_text', arguments: { query: EVIL_PATTERN, regex: true } }] }, { text: 'searched' }]),
        },
        onEvent: (event: RunEvent) => {
          if (event.kind !== 'session') return;
          events.push(event.event);
          if (event.event.type === 'assistant/message') searching();
        },
      })) as RemoteSubagentRun,
    );
    await searchStarted;

    const latencies = await timedRequests(bystander);
    // Every bystander request was answered while the search was still running.
    expect(events.filter((e) => e.type === 'tool/result')).toEqual([]);

    // The daemon has honoured the cancel when the child's turn ends (its session says so).
    const turnEnded = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (events.some((e) => e.type === 'turn/end')) {
          clearInterval(check);
          resolve();
        }
      }, 1);
    });
    const cancelledAt = performance.now();
    controller.abort();
    await turnEnded;
    const cancelMs = performance.now() - cancelledAt;
    expect((await run.result).stopReason).toBe('aborted');
    expect(events.map((e) => e.type).slice(-2)).toEqual(['tool/result', 'turn/end']);

    const fmt = (ms: number): string => ms.toFixed(1);
    const stats = (sorted: number[]): string =>
      `p50 ${fmt(percentile(sorted, 50))} ms, p99 ${fmt(percentile(sorted, 99))} ms, max ${fmt(sorted.at(-1) ?? Number.NaN)} ms`;
    console.log(
      `[search-freeze] providers/list x${BYSTANDER_REQUESTS} from a bystander: idle ${stats(idle)}; ` +
        `during the ${EVIL_PATTERN} search ${stats(latencies)}; cancel -> turn/end ${fmt(cancelMs)} ms`,
    );
  });

  it('refuses a FIFO in the workspace without blocking, and the daemon still exits on SIGTERM', async () => {
    const owner = await clients.connect(daemon.socket);
    const results: string[] = [];
    const run = runs.track(
      (await owner.start('spawn', {
        prompt: [{ type: 'text', text: 'look' }],
        parent: { sessionId: 'fifo-e2e', cwd: workspace },
        signal: new AbortController().signal,
        onEvent: (event: RunEvent) => {
          if (event.kind === 'session' && event.event.type === 'tool/result') {
            results.push(event.event.content.map((b) => (b.type === 'text' ? b.text : '')).join(''));
          }
        },
        agentOptions: {
          model: scripted([
            { toolCalls: [{ name: 'read_file', arguments: { path: 'pipe' } }] },
            { toolCalls: [{ name: 'search_text', arguments: { query: 'needle', path: 'pipe' } }] },
            { toolCalls: [{ name: 'search_text', arguments: { query: 'needle', path: 'notes.txt' } }] },
            { text: 'done' },
          ]),
        },
      })) as RemoteSubagentRun,
    );
    expect((await run.result).stopReason).toBe('completed');
    expect(results).toEqual(['read_file failed: pipe is not a regular file', 'search_text failed: pipe is not a regular file', 'notes.txt:1: the needle']);
    await runs.disposeAll();
    await clients.closeAll();
    await daemon.stop();
    // Exited on its own SIGTERM, not on the helper's SIGKILL fallback.
    expect(daemon.proc.signalCode).not.toBe('SIGKILL');
  });
});
