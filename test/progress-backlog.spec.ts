import { describe, expect, it } from 'vitest';
import { ProgressBacklog } from '../daemon/transport/progress-backlog.js';

const delta = (text: string) => ({ kind: 'text-delta', text }) as const;
const turnEnd = { kind: 'session', event: { type: 'turn/end', reason: 'completed' } } as const;

describe('ProgressBacklog', () => {
  it('merges consecutive text deltas of a run and keeps order around other events', () => {
    const backlog = new ProgressBacklog(1 << 20);
    backlog.push('r1', delta('Hel'));
    backlog.push('r1', delta('lo'));
    backlog.push('r2', delta('other'));
    backlog.push('r1', turnEnd);
    backlog.push('r1', delta('!'));
    expect(backlog.size).toBe(4);
    expect(backlog.take('r1')).toEqual([delta('Hello'), turnEnd, delta('!')]);
    expect(backlog.take('r2')).toEqual([delta('other')]);
    expect(backlog.size).toBe(0);
  });

  it('takes fairly across runs, each in order', () => {
    const backlog = new ProgressBacklog(1 << 20);
    for (const run of ['a', 'b']) {
      backlog.push(run, delta(`${run}1`));
      backlog.push(run, turnEnd);
    }
    expect(backlog.takeSome(3).map(([run, e]) => `${run}:${e.kind}`)).toEqual(['a:text-delta', 'b:text-delta', 'a:session']);
    expect(backlog.takeSome(10)).toHaveLength(1);
  });

  it('stays under its byte bound by dropping the oldest progress, and counts it', () => {
    const backlog = new ProgressBacklog(1000);
    for (let i = 0; i < 100; i++) backlog.push('r', { kind: 'session', event: { type: 'turn/end', reason: 'completed', diagnostic: 'x'.repeat(50) } });
    expect(backlog.dropped).toBeGreaterThan(80);
    const kept = backlog.take('r');
    expect(JSON.stringify(kept).length).toBeLessThan(1500);
    expect(kept.length + backlog.dropped).toBe(100);
  });
});
