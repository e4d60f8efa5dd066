import { describe, expect, it } from 'vitest';
import { ProgressBacklog } from '../daemon/connection/progress-backlog.js';

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

  it('refuses an event past its byte bound and keeps what it holds, so its owner can cut the reader off', () => {
    const backlog = new ProgressBacklog(1000);
    const big = { kind: 'session', event: { type: 'turn/end', reason: 'completed', diagnostic: 'x'.repeat(50) } } as const;
    let accepted = 0;
    for (let i = 0; i < 100; i++) if (backlog.push('r', big)) accepted += 1;
    expect(accepted).toBeGreaterThan(5);
    expect(accepted).toBeLessThan(100);
    expect(backlog.waitingBytes).toBeLessThanOrEqual(1000);
    expect(backlog.take('r')).toHaveLength(accepted);
    expect(backlog.waitingBytes).toBe(0);
  });

  it('takes one event of any size when empty', () => {
    const backlog = new ProgressBacklog(10);
    expect(backlog.push('r', delta('x'.repeat(100)))).toBe(true);
    expect(backlog.push('r', delta('y'))).toBe(false);
    expect(backlog.take('r')).toEqual([delta('x'.repeat(100))]);
  });
});
