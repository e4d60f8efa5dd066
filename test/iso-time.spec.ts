/**
 * common/iso-time.ts: the same text as Date.prototype.toISOString, without asking ICU for the time
 * zone, and the daemon's only way to write one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { isoTime } from '../common/iso-time.js';
import { REPO } from './support/daemon-process.js';

it('matches toISOString across the years 0–9999, to the millisecond', () => {
  const samples = [0, 1, 999, 86_399_999, Date.UTC(2026, 11, 3, 14, 5, 9, 123), Date.UTC(2000, 1, 29, 23, 59, 59, 999), Date.UTC(0, 0, 1), Date.UTC(9999, 11, 31, 23, 59, 59, 999), -1];
  // Years 0-99 through Date.UTC land in 1900-1999: set them explicitly.
  const year5 = new Date(0);
  year5.setUTCFullYear(5, 6, 7);
  samples.push(year5.getTime());
  for (let ms = -62_000_000_000_000; ms < 253_000_000_000_000; ms += 7_777_777_777_777) samples.push(ms);
  for (const ms of samples) expect(isoTime(ms), String(ms)).toBe(new Date(ms).toISOString());
});

it('is toISOString outside the years 0–9999 and for an invalid time', () => {
  const before = Date.UTC(-1, 0, 1);
  const after = Date.UTC(10_000, 0, 1);
  expect(isoTime(before)).toBe(new Date(before).toISOString());
  expect(isoTime(before)).toMatch(/^-0000\d\d-/);
  expect(isoTime(after)).toBe('+010000-01-01T00:00:00.000Z');
  expect(() => isoTime(Number.NaN)).toThrow(RangeError);
});

it('defaults to now', () => {
  const before = Date.now();
  const stamp = Date.parse(isoTime());
  expect(stamp).toBeGreaterThanOrEqual(before);
  expect(stamp).toBeLessThanOrEqual(Date.now());
});

it('is how the daemon writes timestamps: no toISOString in daemon/ or common/ outside iso-time.ts', () => {
  const offenders: string[] = [];
  for (const room of ['daemon', 'common']) {
    for (const entry of readdirSync(join(REPO, room), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const path = join(entry.parentPath, entry.name);
      if (path.endsWith(join('common', 'iso-time.ts'))) continue;
      readFileSync(path, 'utf8')
        .split('\n')
        .forEach((line, i) => line.includes('.toISOString(') && offenders.push(`${path.slice(REPO.length + 1)}:${i + 1}`));
    }
  }
  expect(offenders).toEqual([]);
});
