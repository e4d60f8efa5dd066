/**
 * BENCHMARKS.md: the machine, the command, the targets, then every section's tables. The targets
 * table also shows what the previous run of this command measured for the same target (read back
 * from the file this run replaces), and earlier runs' targets tables are kept below, each with its
 * date and commit: a before/after is then two runs of the same command, each reproducible at its
 * commit, never a figure typed in by hand.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Machine } from './machine.js';
import type { Report } from './report.js';

/** How many earlier runs' targets tables are kept. */
const EARLIER_RUNS = 4;

interface PreviousRun {
  /** "date, commit, load at start" of that run. */
  readonly label: string;
  readonly measured: ReadonlyMap<string, string>;
  readonly targetsTable: readonly string[];
  readonly earlier: readonly string[];
}

/** The run recorded in the file about to be replaced, if it has the shape this writer gives it. */
export function readPreviousRun(text: string): PreviousRun | undefined {
  const field = (name: string): string | undefined => new RegExp(`^\\| ${name} \\| (.*) \\|$`, 'm').exec(text)?.[1];
  const date = field('date');
  const commit = field('commit');
  // The table may follow the line saying what its previous-run column is.
  const targets = /^## Targets\n\n(?:[^|\n].*\n\n)?((?:\|.*\n)+)/m.exec(text);
  if (!date || !commit || !targets) return undefined;
  const rows = targets[1]!.trimEnd().split('\n');
  const measured = new Map<string, string>();
  for (const row of rows.slice(2)) {
    const cells = row.split(' | ').map((c) => c.replace(/^\| ?| ?\|$/g, ''));
    if (cells.length >= 3) measured.set(cells[0]!, cells[1]!);
  }
  const load = field('load average \\(1 / 5 / 15 min\\)')?.split(' at start')[0] ?? '?';
  const earlierAt = text.indexOf('\n## Earlier runs\n');
  const earlier = earlierAt < 0 ? [] : text.slice(earlierAt + '\n## Earlier runs\n'.length).split(/\n(?=### )/).map((b) => b.trim()).filter((b) => b.startsWith('### '));
  // The targets table as that run wrote it, without a previous-run column of its own.
  const table = rows.map((row) => row.split(' | ').slice(0, 3).join(' | ').replace(/ \|?$/, '') + ' |');
  return { label: `${date.slice(0, 16).replace('T', ' ')} UTC, commit ${commit.split(' ')[0]}, load ${load}`, measured, targetsTable: table, earlier };
}

export function writeBenchmarks(path: string, report: Report, machine: Machine, loadEnd: string, durationS: number, steal: string): void {
  const previous = existsSync(path) ? readPreviousRun(readFileSync(path, 'utf8')) : undefined;
  const out: string[] = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (= `npm run build && node dist/bench/run.js`); every figure below comes from that one run.',
    'Re-run it to refresh this file; `node dist/bench/run.js wire acp` runs only the named sections (wire, profile, children, streaming, upstream, memory,',
    'long-run, acp, acp-warm, pool, cluster, startup, faces, stored-runs, worktrees) and prints them without writing this file; `npm run bench:quick`',
    'runs all on small budgets.',
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
    `| CPU time stolen by the host (\`steal\` in /proc/stat), over the run | ${steal} |`,
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
    'with each other are interleaved in rounds, every other round in reverse order, so neither a load change on the machine nor',
    'what one configuration leaves behind for the next biases any of them; the 5-step runs of section 2, milliseconds each, take',
    'turns run by run within each round. "Daemon process" is the',
    'built CLI\'s `daemon --socket …` command with the test fixture providers loaded (`echo`) and the scripted model, entered',
    'through `bench/daemon-host.ts` under `--expose-gc` (it only adds a SIGUSR2 hook that runs a full GC and reports memory,',
    'and, for the wire row (s) alone, a switch that answers starts before the service);',
    'the private stdio daemon is the plain `dist/cli/main.js daemon --stdio`. State dirs are temp dirs on the local disk. All',
    'clients run in the bench process. RSS is read from `/proc/PID/status`, CPU from `/proc/PID/stat`.',
    '',
    '## Targets',
    '',
    ...(previous ? [`The last column is the previous run of this command (${previous.label}); "—" where that run had no such target.`, ''] : []),
    previous ? '| target | measured | verdict | previous run |' : '| target | measured | verdict |',
    previous ? '| --- | --- | --- | --- |' : '| --- | --- | --- |',
    ...report.verdicts.map(
      (v) => `| ${v.target} | ${v.measured} | ${v.met ? 'met' : '**missed**'} |${previous ? ` ${previous.measured.get(v.target) ?? '—'} |` : ''}`,
    ),
    '',
  );
  if (report.failures.length > 0) {
    out.push('## Failures in this run', '', ...report.failures.map((f) => `- \`${f.split('\n')[0]}\``), '');
  }
  out.push(report.markdownSections());
  if (previous) {
    const earlier = [`### ${previous.label}`, '', ...previous.targetsTable].join('\n');
    out.push('', '## Earlier runs', '', 'Their targets tables, newest first, as each run of this command wrote them.', '', [earlier, ...previous.earlier].slice(0, EARLIER_RUNS).join('\n\n'));
  }
  writeFileSync(path, `${out.join('\n').trimEnd()}\n`);
}
