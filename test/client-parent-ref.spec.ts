import { afterEach, describe, expect, it } from 'vitest';
import { completedTurnPrefix, connect, toParentRef, type HarnessAgentLike, type SessionEvent } from '../client/index.js';
import { FakeDaemon, captureLogger, descriptor } from './support/fake-daemon-peer.js';

const text = (value: string): [{ type: 'text'; text: string }] => [{ type: 'text', text: value }];

const LOG: SessionEvent[] = [
  { type: 'user/message', content: text('first') },
  { type: 'assistant/message', content: text('one') },
  { type: 'turn/end', reason: 'completed' },
  { type: 'user/message', content: text('second') },
  { type: 'assistant/message', content: text('two') },
  { type: 'turn/end', reason: 'max-tokens' },
  // The in-flight turn: it holds the pending delegation call.
  { type: 'user/message', content: text('third') },
  { type: 'assistant/message', content: text(''), toolCalls: [{ id: 'c', name: 'subagent', arguments: '{}' }] },
];

function harnessAgent(overrides: { header?: Record<string, unknown>; options?: Record<string, unknown>; events?: SessionEvent[]; log?: SessionEvent[] } = {}): HarnessAgentLike {
  return {
    session: {
      id: 'session-parent',
      header: { cwd: '/repo', delegationDepth: 1, ...overrides.header } as HarnessAgentLike['session']['header'],
      ...(overrides.events ? { events: overrides.events } : {}),
      ...(overrides.log ? { log: overrides.log } : {}),
    },
    options: { subagentDepth: 2, ...overrides.options },
  };
}

describe('completedTurnPrefix', () => {
  it('keeps the events up to and including the last turn/end', () => {
    expect(completedTurnPrefix(LOG)).toEqual(LOG.slice(0, 6));
  });

  it('gives an empty seed when no turn completed, and accepts any iterable', () => {
    expect(completedTurnPrefix(LOG.slice(0, 2))).toEqual([]);
    expect(completedTurnPrefix(new Set(LOG.slice(0, 3)))).toEqual(LOG.slice(0, 3));
  });
});

describe('toParentRef', () => {
  it('reads a harness-shaped agent: session id, header cwd and depth, runtime subagentDepth', () => {
    expect(toParentRef(harnessAgent(), { includeEvents: false })).toEqual({
      sessionId: 'session-parent',
      cwd: '/repo',
      delegationDepth: 1,
      subagentDepth: 2,
    });
  });

  it('omits absent depths rather than inventing 0', () => {
    const agent: HarnessAgentLike = { session: { id: 's', header: { cwd: '/r' } } };
    expect(toParentRef(agent, { includeEvents: false })).toEqual({ sessionId: 's', cwd: '/r' });
  });

  it('passes malformed depth values through unchanged for the daemon to reject', () => {
    const ref = toParentRef(harnessAgent({ header: { delegationDepth: -1 }, options: { subagentDepth: '3' } }), {
      includeEvents: false,
    });
    expect(ref.delegationDepth).toBe(-1);
    expect(ref.subagentDepth).toBe('3');
    const fractional = toParentRef({ sessionId: 's', cwd: '/r', delegationDepth: 1.5, subagentDepth: Number.NaN }, { includeEvents: false });
    expect(fractional.delegationDepth).toBe(1.5);
    expect(fractional.subagentDepth).toBeNaN();
  });

  it('attaches the completed-turn prefix of session.events, else session.log, only when asked', () => {
    expect(toParentRef(harnessAgent({ events: LOG }), { includeEvents: true }).events).toEqual(LOG.slice(0, 6));
    expect(toParentRef(harnessAgent({ log: LOG.slice(0, 4) }), { includeEvents: true }).events).toEqual(LOG.slice(0, 3));
    expect(toParentRef(harnessAgent({ events: LOG }), { includeEvents: false })).not.toHaveProperty('events');
  });

  it('normalises a plain reference, cutting its events the same way', () => {
    const ref = toParentRef({ sessionId: 's', cwd: '/r', subagentDepth: 0, events: LOG }, { includeEvents: true });
    expect(ref).toEqual({ sessionId: 's', cwd: '/r', subagentDepth: 0, events: LOG.slice(0, 6) });
  });

  it('rejects a parent that is neither shape with INVALID_REQUEST', () => {
    expect(() => toParentRef({ id: 'x' } as never, { includeEvents: false })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    expect(() => toParentRef({ session: { id: 's', header: {} } } as never, { includeEvents: false })).toThrow(
      expect.objectContaining({ code: 'INVALID_REQUEST', details: { field: '/parent/session/header/cwd' } }),
    );
  });
});

describe('parent on the wire', { timeout: 5000 }, () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup = [];
  });

  it('sends fork the parent seed and spawn none; malformed depth reaches the daemon as sent', async () => {
    const daemon = await FakeDaemon.start({ providers: [descriptor('spawn'), descriptor('fork', { inheritsParentContext: true })] });
    cleanup.push(() => daemon.close());
    const service = await connect({ socket: daemon.socketPath, logger: captureLogger() });
    cleanup.push(() => service.close());
    const parent = harnessAgent({ events: LOG, header: { delegationDepth: -2 } });
    const base = { prompt: text('go'), signal: new AbortController().signal, parent };
    await service.start('fork', base);
    await service.start('spawn', base);
    const [forkParams, spawnParams] = (await daemon.connection()).paramsOf('subagent/start') as Array<{ parent: unknown }>;
    expect(forkParams?.parent).toEqual({ sessionId: 'session-parent', cwd: '/repo', delegationDepth: -2, subagentDepth: 2, events: LOG.slice(0, 6) });
    expect(spawnParams?.parent).toEqual({ sessionId: 'session-parent', cwd: '/repo', delegationDepth: -2, subagentDepth: 2 });
  });
});
