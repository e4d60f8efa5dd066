/**
 * What holding an endpoint's limits for a pool costs per model request: the same closed loop of
 * permits (take one, mark the response begun, hold it HOLD_MS, give it back with its usage) against
 * one daemon's governor (state in memory) and against three members' view of one JetStream KV key
 * (kv-shared-limit.ts, in this process: the KV's cost without daemons around it), on a real
 * nats-server. The limit is `maxConcurrent` 8, wanted by 12 requesters at once.
 */
import { NatsLink } from '../daemon/cluster/nats-link.js';
import { EndpointGovernor } from '../daemon/upstream/governor.js';
import { KvPermits } from '../daemon/upstream/kv-shared-limit.js';
import { startNatsServer } from '../test/support/nats-server.js';
import type { Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, percentile, rate, ratio } from './stats.js';
import { Table } from './table.js';

const HOLD_MS = 5;
const LIMIT = 8;
const REQUESTERS = 12;

export interface PoolPermitsOptions {
  readonly requests: number;
}

interface Measured {
  readonly perSecond: number;
  readonly waits: number[];
}

async function closedLoop(requests: number, governors: readonly EndpointGovernor[]): Promise<Measured> {
  const waits: number[] = [];
  let taken = 0;
  const never = new AbortController().signal;
  const begun = performance.now();
  await Promise.all(
    Array.from({ length: REQUESTERS }, async (_, i) => {
      const governor = governors[i % governors.length]!;
      while (taken < requests) {
        taken += 1;
        const asked = performance.now();
        const permit = await governor.acquire({ client: `c${i}`, lineage: `l${i}` }, never);
        waits.push(performance.now() - asked);
        permit.streaming();
        await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
        permit.release({ kind: 'ok', tokens: 10 });
      }
    }),
  );
  return { perSecond: (requests / (performance.now() - begun)) * 1000, waits: waits.sort((a, b) => a - b) };
}

export async function poolPermitsTable(report: Report, cleanup: Cleanup, options: PoolPermitsOptions): Promise<void> {
  const limits = { maxConcurrent: LIMIT };
  const local = await closedLoop(options.requests, [new EndpointGovernor('http://bench', limits)]);

  const nats = await startNatsServer();
  cleanup.defer('stop nats-server', () => nats.stop());
  const members: EndpointGovernor[] = [];
  for (let i = 0; i < 3; i++) {
    const link = await NatsLink.open(nats.url, { name: `bench-pool-${i}` });
    cleanup.defer('close a NATS link', () => link.close());
    const permits = await KvPermits.open(link.js, 'bench_upstream');
    members.push(new EndpointGovernor('http://bench', limits, permits.limit('http://bench|sk-bench')));
  }
  const pooled = await closedLoop(options.requests, members);

  const table = new Table('Pool permits', ['limits held', 'requests', 'permits / s', 'wait p50', 'wait p95', 'permits / s vs one daemon']);
  for (const [name, m] of [
    ['one daemon (in memory)', local],
    ['3 members (JetStream KV)', pooled],
  ] as const) {
    table.row(name, options.requests, rate(m.perSecond), ms(percentile(m.waits, 50)), ms(percentile(m.waits, 95)), ratio(m.perSecond / local.perSecond));
  }
  table.note(
    `${REQUESTERS} requesters want a permit at once under maxConcurrent ${LIMIT}; each holds it ${HOLD_MS} ms. The pool writes its key 3 times a request ` +
      '(send, first data, end) by compare-and-set and polls it every 50 ms while full; a model request takes seconds, so the wait is the figure to weigh.',
  );
  report.table(table);
}
