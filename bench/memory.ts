/**
 * Section "memory": the daemon's true peak RSS over idle (memory-peaks.ts: a fresh daemon per
 * case, VmHWM over its whole life, never reset) in the two cases docs/security.md bounds at
 * +64 MiB: a child flooding 50 MiB of output to a streaming client, and 5 clients that never read
 * while their runs stream 20 MiB each. test/memory-bounds.e2e.ts asserts the same bound.
 */
import { floodPeak, mib, nonReadersPeak, type MemoryPeak } from './memory-peaks.js';
import type { Report } from './report.js';
import { Table } from './table.js';

export const MEMORY_BOUND_MIB = 64;

export async function memoryBench(report: Report, options: { readonly floodMib: number; readonly nonReaderMib: number }): Promise<void> {
  report.section(
    'Memory: floods of child output',
    `Each case on a fresh daemon (default limits), warmed by one run: its idle VmRSS, then the case, then VmHWM, the kernel's ` +
      `peak over the process's life (nothing reset, nothing sampled). An ACP agent replies with ${options.floodMib} MiB to a streaming ` +
      `client; then 5 clients that never read start a run each whose agent replies with ${options.nonReaderMib} MiB, streamed.`,
  );
  const cases: MemoryPeak[] = [await floodPeak(options.floodMib), await nonReadersPeak(5, options.nonReaderMib)];
  const table = new Table('Memory', ['case', 'idle RSS', 'peak (VmHWM)', 'growth']);
  for (const m of cases) table.row(m.scenario, mib(m.idle), mib(m.peak), `+${mib(m.peak - m.idle)}`);
  report.table(table);
  for (const m of cases) {
    const growth = m.peak - m.idle;
    report.verdict(`${m.scenario}: peak RSS within +${MEMORY_BOUND_MIB} MiB of idle`, `+${mib(growth)}`, growth <= MEMORY_BOUND_MIB * 1024 * 1024);
  }
}
