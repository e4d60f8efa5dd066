/**
 * Upstream: 40 `spawn` children at once against a chat-completions server that, like a provider,
 * streams at most 4 responses at once and answers 429 with `Retry-After: 1` beyond that. Every
 * answer takes STREAM_MS. The ideal is runs × stream time ÷ limit; the ratio is the measured wall
 * time (first start to last result) over it. Rows: the endpoint's limit learned (no config), and
 * given (`endpoints.*.maxConcurrent`). Then what holding the limits for a cluster costs per request (upstream-pool.ts).
 */
import type { RemoteSubagentRun } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ScriptedResponse } from '../test/support/chat-completions-server.js';
import { abortSignal, clients, daemonProcess } from './daemons.js';
import { Cleanup, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { poolPermitsTable } from './upstream-pool.js';
import { ms, pct, ratio } from './stats.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

export interface UpstreamOptions {
  readonly children: number;
  readonly streamLimit: number;
  readonly streamMs: number;
  /** Permits through the pool-wide limit (upstream-pool.ts). */
  readonly poolRequests: number;
}

function answer(streamMs: number): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      { wait: streamMs },
      { data: chunk({ content: 'done' }, { finish_reason: 'stop', usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } }) },
      { done: true },
    ],
  };
}

export async function upstreamBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: UpstreamOptions): Promise<void> {
  const { children, streamLimit, streamMs } = options;
  const ideal = (children * streamMs) / streamLimit;
  report.section(
    'Upstream: one governed model endpoint (40 children, a 4-stream provider)',
    `${children} \`spawn\` children started at once by 4 clients against a chat-completions server that streams at most ${streamLimit} ` +
      `responses at once (${ms(streamMs)} each) and answers 429 with \`Retry-After: 1\` beyond that. Ideal: runs × stream time ÷ limit = ${ms(ideal)}. ` +
      'Before the endpoint governor (ab4cf87) 20 of 40 ended `error` and 100 of 120 requests were 429s.',
  );
  const table = new Table('Upstream', ['endpoint limit', 'completed', 'requests', '429s', 'wall time', 'ideal', 'measured ÷ ideal']);
  let worst = 0;
  for (const [name, endpoints] of [
    ['learned (adaptive)', undefined],
    [`given (maxConcurrent ${streamLimit})`, { '*': { maxConcurrent: streamLimit } }],
  ] as const) {
    const server = await startChatCompletionsServer({ fallback: () => answer(streamMs), streamLimit: { max: streamLimit, retryAfter: '1' } });
    cleanup.defer('close the model server', () => server.close());
    const daemon = await daemonProcess(
      cleanup,
      {
        model: { baseUrl: server.baseUrl, apiKeyEnv: 'BENCH_UPSTREAM_KEY', default: 'bench-model' },
        limits: { maxConcurrentRuns: 4096, maxRunsPerConnection: 4096 },
        ...(endpoints && { endpoints }),
      },
      [],
      { BENCH_UPSTREAM_KEY: 'sk-bench' },
    );
    const services = await clients(cleanup, daemon.socket, 4, 'bench-upstream');
    const parent = { sessionId: 'bench-upstream', cwd: world.workspace };
    const begun = performance.now();
    const runs = await Promise.all(
      Array.from({ length: children }, async (_, i) => {
        const run = (await services[i % services.length]!.start('spawn', {
          prompt: [{ type: 'text', text: `task ${i}` }],
          parent,
          signal: abortSignal(),
        })) as RemoteSubagentRun;
        cleanup.defer('dispose a run', () => run.dispose().catch(() => undefined));
        return run;
      }),
    );
    const results = await withTimeout(Promise.all(runs.map((run) => run.result)), 120_000, 'upstream children');
    const wall = performance.now() - begun;
    const completed = results.filter((r) => r.stopReason === 'completed').length;
    const requests = server.load.streamed + server.load.refused;
    worst = Math.max(worst, wall / ideal);
    table.row(name, `${completed}/${children}`, requests, `${server.load.refused} (${pct(server.load.refused / requests)})`, ms(wall), ms(ideal), ratio(wall / ideal));
    if (completed !== children) report.failure('upstream', new Error(`${name}: only ${completed} of ${children} completed`));
  }
  table.note('Wall time runs from the first start to the last result, starts (and the SDK loading once) included.');
  report.table(table);
  report.verdict(`${children} children vs a ${streamLimit}-stream limit within 1.3× the ideal`, `${ratio(worst)} (worse row)`, worst <= 1.3);
  await poolPermitsTable(report, cleanup, { requests: options.poolRequests });
}
