/**
 * Section "memory": the daemon's peak RSS over idle while a child floods 50 MiB of output and
 * its client streams it (output-memory.ts), against the +64 MiB that docs/security.md states.
 * The other bound in that table, five clients that never read 20 MiB each, is asserted by
 * test/faults-clients.e2e.ts, which prints its figure.
 */
import { mibText, outputMemory } from './output-memory.js';
import type { Report } from './report.js';
import { Table } from './table.js';

const BOUND_MIB = 64;

export async function memoryBench(report: Report, options: { readonly mib: number }): Promise<void> {
  report.section(
    'Memory: a flood of child output',
    `An ACP agent replies with ${options.mib} MiB of text while the client streams the run's events; the daemon keeps the result up to ` +
      "its output cap. Peak is the kernel's VmHWM, reset just before the flood.",
  );
  const m = await outputMemory(options.mib);
  const growth = m.peak - m.rssBefore;
  const table = new Table('Memory', ['child output', 'RSS before', 'peak', 'growth', 'streamed', 'result kept', 'run index grew']);
  table.row(`${m.mib} MiB`, mibText(m.rssBefore), mibText(m.peak), mibText(growth), mibText(m.streamedBytes), mibText(m.resultBytes), mibText(m.indexGrowth));
  report.table(table);
  report.verdict(`${m.mib} MiB of child output: peak RSS growth within +${BOUND_MIB} MiB`, mibText(growth), growth <= BOUND_MIB * 1024 * 1024);
}
