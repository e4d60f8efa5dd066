/** BENCHMARKS.md: the machine, the command, the targets, then every section's tables. */
import { writeFileSync } from 'node:fs';
import type { Machine } from './machine.js';
import type { Report } from './report.js';

export function writeBenchmarks(path: string, report: Report, machine: Machine, loadEnd: string, durationS: number): void {
  const out: string[] = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (= `npm run build && node dist/bench/run.js`); every figure below comes from that one run.',
    'Re-run it to refresh this file; `node dist/bench/run.js wire acp` runs only the named sections (wire, children, streaming, acp, pool,',
    'startup, faces, stored-runs) and prints them without writing this file; `npm run bench:quick` runs all on small budgets.',
    '',
    '| | |',
    '| --- | --- |',
    `| date | ${machine.date} |`,
    `| commit | ${machine.commit} |`,
    `| machine | ${machine.nproc} CPUs (\`nproc\`), ${machine.cpu}, ${machine.memory} RAM |`,
    `| node | ${machine.node} |`,
    `| command | \`npm run bench\` (\`node dist/bench/run.js\`) |`,
    `| load average (1 / 5 / 15 min) | ${machine.loadStart} at start, ${loadEnd} at the end |`,
    `| duration | ${durationS.toFixed(0)} s |`,
    '',
  ];
  const busy = Number(machine.loadStart.split(' / ')[0]) >= machine.nproc * 0.5;
  if (busy) {
    out.push(
      `> The machine was shared while this ran (load average ${machine.loadStart} on ${machine.nproc} CPUs): other processes took CPU`,
      '> from both the daemon and the clients, so latencies and rates are pessimistic and noisy. Re-run on a quiet machine for',
      '> figures to quote.',
      '',
    );
  }
  out.push(
    '**Method.** Every loop is bounded by a count and a time budget, and warmed up before it is measured. Percentiles are',
    'nearest-rank over all samples (p99 of fewer than 100 samples is the maximum). Latency configurations that are compared',
    'with each other are interleaved in rounds, so a load change on the machine biases none of them. "Daemon process" is the',
    'built CLI\'s `daemon --socket …` command with the test fixture providers loaded (`echo`) and the scripted model, entered',
    'through `bench/daemon-host.ts` under `--expose-gc` (it only adds a SIGUSR2 hook that runs a full GC and reports memory);',
    'the private stdio daemon is the plain `dist/cli/main.js daemon --stdio`. State dirs are temp dirs on the local disk. All',
    'clients run in the bench process. RSS is read from `/proc/PID/status`, CPU from `/proc/PID/stat`.',
    '',
    '## Targets',
    '',
    '| target | measured | verdict |',
    '| --- | --- | --- |',
    ...report.verdicts.map((v) => `| ${v.target} | ${v.measured} | ${v.met ? 'met' : '**missed**'} |`),
    '',
  );
  if (report.failures.length > 0) {
    out.push('## Failures in this run', '', ...report.failures.map((f) => `- \`${f.split('\n')[0]}\``), '');
  }
  out.push(report.markdownSections());
  writeFileSync(path, `${out.join('\n').trimEnd()}\n`);
}
