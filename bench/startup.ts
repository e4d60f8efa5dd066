/**
 * Section 5, start-up: what a daemon costs before it does any work. Each sample is a fresh
 * process, alternated pair by pair with its floor (bare `node`), so a change in the machine's
 * load hits both sides alike. Figures: the import of the daemon library, and the daemon command
 * from spawn to accepting connections, with its idle RSS there.
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, REPO } from './daemons.js';
import { Cleanup, rssOf, sleep, withTimeout } from './procs.js';
import type { Report } from './report.js';
import { bytes, ms, summarize } from './stats.js';
import { Table } from './table.js';
import { socketAccepts } from '../common/socket-probe.js';

export interface StartupOptions {
  /** Alternating pairs per figure. */
  readonly pairs: number;
}

/** Wall time of one `node -e <code>` process, in ms. */
function nodeProcessMs(code: string): number {
  const started = performance.now();
  execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: REPO, stdio: 'ignore' });
  return performance.now() - started;
}



/** Spawn → first accepted connection of the daemon command; its RSS then. */
async function daemonColdStart(cleanup: Cleanup): Promise<{ ms: number; rss: number }> {
  const dir = cleanup.tempDir();
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  writeFileSync(config, '{}');
  const started = performance.now();
  const child = spawn(process.execPath, [CLI, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config], {
    stdio: 'ignore',
    env: { PATH: process.env['PATH'] ?? '', HOME: dir },
  });
  try {
    await withTimeout(
      (async () => {
        while (!(existsSync(socket) && (await socketAccepts(socket)))) {
          if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}`);
          await sleep(2);
        }
      })(),
      20_000,
      'daemon cold start',
    );
    return { ms: performance.now() - started, rss: rssOf(child.pid!) };
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) => (child.exitCode === null && child.signalCode === null ? child.once('exit', resolve) : resolve(undefined)));
  }
}

export async function startupBench(report: Report, cleanup: Cleanup, options: StartupOptions): Promise<void> {
  report.section(
    '5. Start-up',
    'Fresh processes, each figure alternated pair by pair with bare `node` (same flags) so load changes hit both. ' +
      'The SDKs of the openai-compatible model and of ACP load when first used, not here.',
  );
  const bare: number[] = [];
  const library: number[] = [];
  const cold: number[] = [];
  const rss: number[] = [];
  const daemonIndex = join(REPO, 'dist', 'daemon', 'index.js');
  for (let pair = 0; pair < options.pairs; pair++) {
    bare.push(nodeProcessMs('0'));
    library.push(nodeProcessMs(`await import(${JSON.stringify(daemonIndex)})`));
    const start = await daemonColdStart(cleanup);
    cold.push(start.ms);
    rss.push(start.rss);
  }
  const b = summarize(bare);
  const l = summarize(library);
  const c = summarize(cold);
  const r = summarize(rss);
  const table = new Table(`Start-up, ${options.pairs} alternating pairs (median, min–max)`, ['what', 'median', 'min – max', 'over bare node (median)']);
  table.row('bare `node -e 0`', ms(b.p50), `${ms(b.min)} – ${ms(b.max)}`, '—');
  table.row('`import("dist/daemon/index.js")`', ms(l.p50), `${ms(l.min)} – ${ms(l.max)}`, ms(l.p50 - b.p50));
  table.row('daemon command: spawn → accepting connections', ms(c.p50), `${ms(c.min)} – ${ms(c.max)}`, ms(c.p50 - b.p50));
  table.row('daemon idle RSS at that moment', bytes(r.p50), `${bytes(r.min)} – ${bytes(r.max)}`, '—');
  report.table(table);
  report.verdict('daemon library import ≤ 0.25 s over bare node', `${ms(l.p50 - b.p50)} over`, l.p50 - b.p50 <= 250);
  report.verdict('daemon idle RSS ≤ 50 MiB', bytes(r.p50), r.p50 <= 50 * 1024 * 1024);
}
