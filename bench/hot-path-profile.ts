/**
 * Section: where the hot path's CPU goes, both sides, under the wire section's trivial-run load
 * (8 connections × 8 runs in flight): bench/profile.ts's profilers (the daemon under
 * `--cpu-prof`, the client, this process, through the inspector), top functions by self time.
 * Profiling slows both sides, so its rates are not the wire section's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatLoad } from './machine.js';
import { profileLoad, topSelfTime, type CpuProfile } from './profile.js';
import type { Cleanup } from './procs.js';
import type { Report } from './report.js';
import { Table } from './table.js';

export async function hotPathProfile(report: Report, cleanup: Cleanup, options: { readonly seconds: number; readonly top: number }): Promise<void> {
  report.section(
    'Hot-path profile (trivial runs)',
    `Trivial runs (start → result → dispose) over 8 connections × 8 in flight for ${options.seconds} s with a CPU profiler on both ` +
      'sides: the daemon process under `node --cpu-prof`, the client (the bench process) through the inspector. Each row is a ' +
      "function's self time as a share of that process's busy samples (idle excluded); a function without a file is native " +
      '(the socket write, the GC) or generated (the schema validators). `node dist/bench/profile.js` writes the ' +
      'full profiles. Profiling slows both sides: the rates here are not the wire section\'s.',
  );
  const profDir = mkdtempSync(join(tmpdir(), 'subagentd-profile-'));
  cleanup.defer(`remove ${profDir}`, () => rmSync(profDir, { recursive: true, force: true }));
  const measured = await profileLoad(profDir, 'trivial', options.seconds);
  const side = (title: string, profile: CpuProfile): Table => {
    const table = new Table(title, ['self %', 'function', 'file']);
    for (const entry of topSelfTime(profile, options.top)) table.row(`${(entry.share * 100).toFixed(1)} %`, entry.name, entry.where || '—');
    return table;
  };
  const daemon = side('Daemon process, top self time', measured.daemon);
  daemon.note(
    `${Math.round(measured.perSecond)} runs/s with the profilers on; CPU per run: daemon ${measured.daemonCpuUs.toFixed(0)} µs, ` +
      `client ${measured.clientCpuUs.toFixed(0)} µs. Load average ${formatLoad()} at the end.`,
  );
  report.table(daemon);
  report.table(side('Client (the bench process), top self time', measured.client));
}
