/**
 * One shared daemon under load from many real clients (`connect()` over the unix socket):
 * 20 clients × 50 `spawn` runs of a two-step scripted model with starts queueing behind a small
 * concurrency budget — every run settles completed and reaches the client that started it, the
 * budget is never exceeded, nothing is left running or queued. The figures (runs/s, start
 * latency, daemon CPU and RSS) are printed at the end. Fairness and OVERLOADED are in
 * load-admission.e2e.ts, idle connections in load-idle.e2e.ts (each file keeps its own budget).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RemoteSubagentService } from '../client/index.js';
import type { StatusResult } from '../protocol/index.js';
import { cpuTimeMs, percentile, pollUntil, rssMiB, startLoadDaemon, writeScript, type LoadDaemon } from './support/load-daemon.js';

const CLIENTS = 20;
const RUNS_PER_CLIENT = 50;
/** Runs each client keeps in flight: 20 × 5 = 100 outstanding starts against 8 slots. */
const WINDOW = 5;
const LIMITS = { maxConcurrentRuns: 8, maxRunsPerConnection: 4, maxQueued: 1024 };

const figures: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
let work: string;

beforeAll(() => {
  work = mkdtempSync(join(existsShm() ? '/dev/shm' : tmpdir(), 'subagentd-load-pool-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  if (figures.length > 0) console.log(`[load-pool]\n  ${figures.join('\n  ')}`);
});

const existsShm = (): boolean => existsSync('/dev/shm');

function quietClient(name: string, socket: string): Promise<RemoteSubagentService> {
  return connect({
    socket,
    clientInfo: { name, version: '0' },
    requestTimeoutMs: 10_000,
    logger: { error: (message, error) => console.error(`[${name}] ${message}`, error ?? '') },
  });
}

describe('20 clients × 50 spawn runs through a budget of 8', () => {
  let daemon: LoadDaemon;

  beforeAll(async () => {
    daemon = await startLoadDaemon({ limits: LIMITS, detachGraceMs: 0 });
    cleanups.push(() => daemon.stop());
  });

  it('every run completes, reaches its own client, and nothing is left running or queued', async () => {
    const workspace = join(work, 'workspace');
    mkdirSync(workspace);
    writeFileSync(join(workspace, 'notes.txt'), 'a file for list_directory to find\n');
    // Two steps: a tool call, then the answer. Each client's answer names the client, so a run
    // routed to the wrong connection (or a crossed result) is seen.
    const scripts = Array.from({ length: CLIENTS }, (_, i) =>
      writeScript(work, `client-${i}`, {
        steps: [
          { text: 'looking', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], usage: { promptTokens: 5, completionTokens: 1 } },
          { text: `answer for client ${i}`, finish: 'stop', usage: { promptTokens: 9, completionTokens: 3 } },
        ],
      }),
    );

    const monitor = await quietClient('monitor', daemon.socket);
    cleanups.push(() => monitor.close());
    const clients = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => quietClient(`load-${i}`, daemon.socket)));
    cleanups.push(() => Promise.all(clients.map((c) => c.close())).then(() => undefined));

    const ends = clients.map(() => new Map<string, string>());
    clients.forEach((client, i) => client.on('subagent/end', (event) => void ends[i]!.set(event.runId, event.stopReason)));

    // Sample the budget while the load runs: it must queue, and never exceed the limits.
    let maxRunning = 0;
    let maxQueued = 0;
    let maxPerConnection = 0;
    let sampling = true;
    const sampler = (async () => {
      for (let i = 0; sampling && i < 2000; i++) {
        const status = await monitor.ops.status();
        maxRunning = Math.max(maxRunning, status.admission.running);
        maxQueued = Math.max(maxQueued, status.admission.queued);
        for (const share of Object.values(status.admission.byConnection)) maxPerConnection = Math.max(maxPerConnection, share.running);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    const latencies: number[] = [];
    const started = clients.map(() => new Set<string>());
    const failures: string[] = [];
    const cpu0 = cpuTimeMs(daemon.pid);
    const t0 = performance.now();

    const runOne = async (i: number): Promise<void> => {
      const client = clients[i]!;
      const t = performance.now();
      const run = await client.start('spawn', {
        prompt: [{ type: 'text', text: `job for client ${i}` }],
        parent: { sessionId: `load-parent-${i}`, cwd: workspace },
        agentOptions: { model: `scripted:${scripts[i]!}` },
        signal: AbortSignal.timeout(60_000),
      });
      latencies.push(performance.now() - t);
      started[i]!.add(run.id);
      const result = await run.result;
      const text = result.output.map((b) => (b.type === 'text' ? b.text : '')).join('');
      if (result.stopReason !== 'completed' || text !== `answer for client ${i}`) {
        failures.push(`client ${i} run ${run.id}: ${result.stopReason} ${JSON.stringify(text)} ${result.diagnostic ?? ''}`);
      }
      await run.dispose();
    };

    await Promise.all(
      clients.map(async (_, i) => {
        let next = 0;
        const lane = async (): Promise<void> => {
          while (next < RUNS_PER_CLIENT) {
            next += 1;
            await runOne(i);
          }
        };
        await Promise.all(Array.from({ length: WINDOW }, lane));
      }),
    );
    const elapsed = performance.now() - t0;
    const cpu = cpuTimeMs(daemon.pid) - cpu0;
    sampling = false;
    await sampler;

    expect(failures).toEqual([]);
    for (let i = 0; i < CLIENTS; i++) {
      expect(started[i]!.size, `client ${i} runs`).toBe(RUNS_PER_CLIENT);
      // subagent/end can trail run.result by a turn; wait for it (bounded).
      await pollUntil(() => ends[i]!.size, (n) => n >= RUNS_PER_CLIENT, 5000, `client ${i}'s subagent/end events`);
      expect(ends[i]!.size, `client ${i} subagent/end count`).toBe(RUNS_PER_CLIENT);
      // Exactly its own runs, each completed: nothing lost, nothing crossed over.
      expect([...ends[i]!.keys()].sort()).toEqual([...started[i]!].sort());
      expect(new Set(ends[i]!.values())).toEqual(new Set(['completed']));
    }

    const status: StatusResult = await pollUntil(
      () => monitor.ops.status(),
      (s) => s.admission.running === 0 && s.admission.queued === 0 && s.runs.running === 0 && s.runs.starting === 0,
      5000,
      'an idle budget',
    );
    expect(status.admission).toMatchObject({ running: 0, queued: 0, limits: LIMITS });
    expect(status.runs).toMatchObject({ starting: 0, running: 0, settled: 0 });
    expect(status.runs.disposed).toBeGreaterThan(0);

    // The load really queued, and the budget held.
    expect(maxQueued, 'starts queued behind the budget').toBeGreaterThan(0);
    expect(maxRunning).toBeLessThanOrEqual(LIMITS.maxConcurrentRuns);
    expect(maxPerConnection).toBeLessThanOrEqual(LIMITS.maxRunsPerConnection);

    const total = CLIENTS * RUNS_PER_CLIENT;
    figures.push(
      `${total} spawn runs (2 scripted steps, 20 clients, budget ${LIMITS.maxConcurrentRuns}) in ${(elapsed / 1000).toFixed(1)} s = ${((total * 1000) / elapsed).toFixed(0)} runs/s`,
      `start latency (incl. queueing) p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, max ${percentile(latencies, 100).toFixed(1)} ms`,
      `daemon CPU ${cpu.toFixed(0)} ms = ${(cpu / total).toFixed(1)} ms per run (${((cpu / elapsed) * 100).toFixed(0)}% of one core); RSS ${rssMiB(daemon.pid).toFixed(0)} MiB`,
      `peak admission: ${maxRunning} running, ${maxQueued} queued, ${maxPerConnection} per connection`,
    );
  }, 90_000);
});
