/**
 * BENCHMARKS.md keeps its history across runs of `npm run bench`: each write shows the previous
 * run's figure beside every target and keeps earlier runs' targets tables, newest first. A run
 * that cannot read the file it replaces would silently drop both.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { writeBenchmarks } from '../bench/markdown.js';
import type { Machine } from '../bench/machine.js';
import { Report } from '../bench/report.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function run(path: string, commit: string, measured: string): void {
  const report = new Report();
  report.verdict('events/s ≥ 50k', measured, Number(measured) >= 50_000);
  const machine: Machine = { nproc: 2, cpu: 'test cpu', node: 'v22', memory: '1 GiB', date: `2026-12-03T1${commit.length}:00:00.000Z`, commit, loadStart: '0.10 / 0.10 / 0.10', ticksStart: undefined };
  writeBenchmarks(path, report, machine, '0.10 / 0.10 / 0.10', 1, '0.0 %');
}

it('each run shows the one before beside its targets and keeps the earlier runs, also after a run that had a previous column', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-md-'));
  dirs.push(dir);
  const path = join(dir, 'BENCHMARKS.md');
  run(path, 'aaa', '30000');
  run(path, 'bbbb', '40000');
  run(path, 'ccccc', '60000');
  const text = readFileSync(path, 'utf8');
  expect(text).toContain('| events/s ≥ 50k | 60000 | met | 40000 |');
  expect(text).toContain('commit bbbb');
  expect(text).toContain('| CPU time stolen by the host (`steal` in /proc/stat), over the run | 0.0 % |');
  const earlier = text.slice(text.indexOf('## Earlier runs'));
  expect(earlier.indexOf('commit bbbb')).toBeGreaterThan(0);
  expect(earlier.indexOf('commit aaa')).toBeGreaterThan(earlier.indexOf('commit bbbb'));
  expect(earlier).toContain('| events/s ≥ 50k | 30000 | **missed** |');
});
