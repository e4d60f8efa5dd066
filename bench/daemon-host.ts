/**
 * The daemon CLI (dist/cli/main.js) unchanged, plus one hook for memory measurements: on
 * SIGUSR2 it runs a full garbage collection and reports its memory on stderr, so the bench can
 * compare live memory rather than whatever garbage happens to be uncollected.
 *   node --expose-gc dist/bench/daemon-host.js daemon --socket S --state-dir D --config C
 *
 * With SUBAGENTD_BENCH_START=answer-first (the wire section's row s, never a real daemon) each
 * connection serves its first start as usual and answers every later one with a copy of that
 * answer under a new run id, before the service: what is left is the client, the wire and the
 * connection's reading and writing, so (b) − (s) is the service's own work for a start.
 */
import type { Serve } from '../daemon/connection/direct-lane.js';

const gc = (globalThis as { gc?: () => void }).gc;
process.on('SIGUSR2', () => {
  gc?.();
  gc?.();
  const memory = process.memoryUsage();
  process.stderr.write(`bench-gc rss=${memory.rss} heapUsed=${memory.heapUsed}\n`);
});
if (process.env.SUBAGENTD_BENCH_START === 'answer-first') {
  const { DirectLane } = await import('../daemon/connection/direct-lane.js');
  const add = DirectLane.prototype.add;
  DirectLane.prototype.add = function (this: InstanceType<typeof DirectLane>, method: string, serve: Serve): void {
    if (method !== 'subagent/start') return add.call(this, method, serve);
    let first: { runId: string; id: string } | undefined;
    let served = 0;
    add.call(this, method, async (params, cancel) => {
      if (first) return { ...first, runId: `${first.runId}-${++served}`, id: `${first.id}-${served}` };
      const answer = await serve(params, cancel);
      if (typeof answer === 'object' && answer !== null && 'runId' in answer) first = answer as { runId: string; id: string };
      return answer;
    });
  };
}
await import('../cli/main.js');
