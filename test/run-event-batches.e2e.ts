/**
 * Run events and ends on the wire of a real daemon process, by the client's protocol minor: a
 * client of 1.2 (or an LSP-style client that states no version) gets one `run/event` per event, a
 * client that said 1.3 gets `run/events` batches, and both see the same events in the same order. Batches keep the
 * lifecycle order (the start reply first, the run's end last), carry several runs' events in
 * their emission order, stay within their bound, and the client library hands `onEvent` the same
 * sequence a lone-event client reads. A client of 1.3 gets a run's output twice in `subagent/end`
 * (`lastAssistantMessage` beside `result`), one of 1.4 once, and the client library's
 * `subagent/end` event carries `lastAssistantMessage` either way.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RunEvent, type SubagentEndEvent } from '../client/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer, type RpcMessage } from './support/raw-peer.js';

const parent = { sessionId: 'batches', cwd: '/tmp' };
const prompt = (text: string): ContentBlock[] => [{ type: 'text', text }];
let daemon: DaemonProcess;

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
});
afterAll(async () => {
  await daemon?.stop();
});

/** Starts a streamed run of the fixture provider and waits for its end; the peer's messages hold the rest. */
async function streamed(peer: RawPeer, text: string): Promise<{ runId: string; reply: RpcMessage; end: RpcMessage }> {
  const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt(text), parent, stream: true });
  const { runId } = reply.result as { runId: string };
  const end = await peer.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId: string }).runId === runId, 10_000, `the end of ${text}`);
  return { runId, reply, end };
}

/** Two raw peers that said `older` and `newer` at `initialize`, closed once `body` is done. */
async function withMinors(older: string, newer: string, body: (old: RawPeer, current: RawPeer) => Promise<void>): Promise<void> {
  const old = await RawPeer.initialized(daemon.socket, 'old', older);
  const current = await RawPeer.initialized(daemon.socket, 'current', newer);
  try {
    await body(old, current);
  } finally {
    old.close();
    current.close();
  }
}

const texts = (peer: RawPeer, runId: string): string[] => peer.runEvents().filter((e) => e.runId === runId).map((e) => e.event.text ?? '');
const burst = (n: number, bytes: number): string[] => Array.from({ length: n }, (_, i) => `${i}:`.padEnd(bytes, '.'));

describe('run events by protocol minor', () => {
  it('a 1.2 client gets one run/event per event; a 1.3 client gets the same events batched, in the same order', () =>
    withMinors('1.2.0', '1.3.0', async (old, current) => {
      const a = await streamed(old, 'burst 50 8');
      const b = await streamed(current, 'burst 50 8');
      expect(texts(old, a.runId)).toEqual(burst(50, 8));
      expect(texts(current, b.runId)).toEqual(burst(50, 8));
      expect(old.notifications('run/event')).toHaveLength(50);
      expect(old.notifications('run/events')).toHaveLength(0);
      expect(current.notifications('run/event')).toHaveLength(0);
      // One turn's burst: one notification carrying all fifty.
      expect(current.notifications('run/events')).toHaveLength(1);
    }));

  it('an LSP-style client gets batches only when it states 1.3: one that states no version keeps run/event', async () => {
    const token = readFileSync(`${daemon.socket}.token`, 'utf8').trim();
    for (const [options, method] of [
      [{ token }, 'run/event'],
      [{ token, protocolVersion: '1.3.0' }, 'run/events'],
    ] as const) {
      const peer = await RawPeer.connect(daemon.socket);
      try {
        const hello = await peer.request('initialize', { processId: null, rootUri: null, capabilities: {}, initializationOptions: options });
        expect(hello.error).toBeUndefined();
        const { runId } = await streamed(peer, 'burst 5 4');
        expect(texts(peer, runId)).toEqual(burst(5, 4));
        expect(peer.messages.filter((m) => m.method?.startsWith('run/event')).map((m) => m.method)).toEqual(method === 'run/event' ? Array(5).fill(method) : [method]);
      } finally {
        peer.close();
      }
    }
  });
});

describe('order and bounds of batches', () => {
  it('events follow the start reply and precede the end, also for events emitted before the run was published', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    try {
      // The echo fixture emits inside the provider's start: the daemon holds it until the reply is out.
      for (const text of ['echo early', 'burst 20 6']) {
        const { runId, reply, end } = await streamed(peer, text);
        const carried = peer.runEvents().filter((e) => e.runId === runId);
        expect(carried.length).toBeGreaterThan(0);
        for (const { message } of carried) {
          expect(peer.messages.indexOf(message)).toBeGreaterThan(peer.messages.indexOf(reply));
          expect(peer.messages.indexOf(message)).toBeLessThan(peer.messages.indexOf(end));
        }
      }
    } finally {
      peer.close();
    }
  });

  it('runs streaming at once share batches, each run’s events in order and all before its end', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    try {
      const [a, b] = await Promise.all([streamed(peer, 'pair 40'), streamed(peer, 'pair 40')]);
      const count = Array.from({ length: 40 }, (_, i) => String(i));
      expect(texts(peer, a.runId)).toEqual(count);
      expect(texts(peer, b.runId)).toEqual(count);
      // Both runs emit once per timer turn, in the same turns: batches carry both.
      const shared = peer.notifications('run/events').filter((m) => new Set((m.params as { runs: Array<{ runId: string }> }).runs.map((s) => s.runId)).size === 2);
      expect(shared.length).toBeGreaterThan(0);
      for (const { runId, end } of [a, b]) {
        const last = peer.runEvents().filter((e) => e.runId === runId).at(-1)!;
        expect(peer.messages.indexOf(last.message)).toBeLessThan(peer.messages.indexOf(end));
      }
    } finally {
      peer.close();
    }
  });

  it('one turn of many events or of large ones makes several bounded notifications, nothing lost', async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    try {
      const many = await streamed(peer, 'burst 3000 6');
      expect(texts(peer, many.runId)).toEqual(burst(3000, 6));
      const manyBatches = peer.notifications('run/events').filter((m) => (m.params as { runs: Array<{ runId: string }> }).runs[0]!.runId === many.runId);
      expect(manyBatches.length).toBeGreaterThanOrEqual(3);
      for (const m of manyBatches) expect((m.params as { runs: Array<{ events: unknown[] }> }).runs.flatMap((s) => s.events).length).toBeLessThanOrEqual(1024);

      const large = await streamed(peer, 'burst 12 100000'); // 1.2 MB in one turn
      expect(texts(peer, large.runId)).toEqual(burst(12, 100_000));
      const largeBatches = peer.notifications('run/events').filter((m) => (m.params as { runs: Array<{ runId: string }> }).runs[0]!.runId === large.runId);
      expect(largeBatches.length).toBeGreaterThanOrEqual(4);
      for (const m of largeBatches) expect(JSON.stringify(m).length).toBeLessThanOrEqual(256 * 1024 + 1024);
    } finally {
      peer.close();
    }
  });
});

describe('the client library over batches', () => {
  // Under 256 events: more, sent one message each in one turn, would put a lone-event client past
  // the unsent-message threshold, where its deltas are merged in the backlog (a batch is one message).
  it('hands onEvent the sequence a lone-event client reads', async () => {
    const service = await connect({ socket: daemon.socket, requestTimeoutMs: 10_000 });
    const old = await RawPeer.initialized(daemon.socket, 'old', '1.2.0');
    try {
      const seen: RunEvent[] = [];
      const run = await service.start('echo', { prompt: prompt('burst 200 5'), parent, signal: AbortSignal.timeout(10_000), onEvent: (event) => void seen.push(event) });
      await run.result;
      await run.dispose();
      const { runId } = await streamed(old, 'burst 200 5');
      expect(seen).toEqual(old.runEvents().filter((e) => e.runId === runId).map((e) => e.event));
      expect(seen).toHaveLength(200);
    } finally {
      old.close();
      await service.close();
    }
  });
});

/** A run's `subagent/end` params, as the peer read them. */
const endOf = async (peer: RawPeer, text: string): Promise<Record<string, unknown>> => (await streamed(peer, text)).end.params as Record<string, unknown>;

describe('subagent/end by protocol minor', () => {
  it('a 1.3 client gets lastAssistantMessage beside result; a 1.4 client gets the output once, in result', () =>
    withMinors('1.3.0', '1.4.0', async (old, current) => {
      const before = await endOf(old, 'echo twice');
      expect(before['lastAssistantMessage']).toEqual(prompt('echo twice'));
      expect((before['result'] as { output: ContentBlock[] }).output).toEqual(prompt('echo twice'));
      const now = await endOf(current, 'echo once');
      expect(now).not.toHaveProperty('lastAssistantMessage');
      expect((now['result'] as { output: ContentBlock[] }).output).toEqual(prompt('echo once'));
      expect(now['stopReason']).toBe('completed');
    }));

  it("the client library's subagent/end event still carries lastAssistantMessage", async () => {
    const service = await connect({ socket: daemon.socket, clientInfo: { name: 'end-once', version: '0' } });
    try {
      const ends: SubagentEndEvent[] = [];
      service.on('subagent/end', (event) => void ends.push(event));
      const run = await service.start('echo', { prompt: prompt('echo for the event'), parent, signal: new AbortController().signal });
      const result = await run.result;
      await run.dispose();
      expect(result.output).toEqual(prompt('echo for the event'));
      expect(ends).toHaveLength(1);
      expect(ends[0]).toMatchObject({ runId: run.id, stopReason: 'completed', lastAssistantMessage: prompt('echo for the event') });
      expect(ends[0]).not.toHaveProperty('result');
    } finally {
      await service.close();
    }
  });
});
