/**
 * `run/events` batches (daemon/connection/event-batch.ts): one notification per event-loop turn,
 * events in emission order across runs (stretches of one run), bounded by count and size, valid
 * against the declaration, and — through the connection's writer — written before any other
 * message, so nothing written after an event overtakes it. The writer tests use a real unix socket
 * read by vscode-jsonrpc's own reader, as the client reads it.
 */
import { describe, expect, it } from 'vitest';
import type { Message } from 'vscode-jsonrpc/node';
import { frameOfJson, RunEventsNotification, type RunEvent, type RunEventsParams } from '../protocol/index.js';
import { CountingWriter } from '../daemon/connection/counting-writer.js';
import { RunEventBatch, type BatchBounds } from '../daemon/connection/event-batch.js';
import { received, useSocketPairs } from './support/socket-pair.js';

const socketPair = useSocketPairs();

const delta = (text: string): RunEvent => ({ kind: 'text-delta', text });
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A batch whose sends are parsed, checked against the declaration and kept. */
function recordingBatch(bounds?: BatchBounds): { batch: RunEventBatch; sent: RunEventsParams[]; sizes: number[] } {
  const sent: RunEventsParams[] = [];
  const sizes: number[] = [];
  const batch = new RunEventBatch((json, events) => {
    const message = JSON.parse(json) as { jsonrpc: string; method: string; params: unknown };
    expect(message.jsonrpc).toBe('2.0');
    expect(message.method).toBe('run/events');
    const checked = RunEventsNotification.readParams(message.params);
    if (!checked.ok) throw new Error(`invalid batch: ${checked.failure.message}`);
    expect(checked.value.runs.reduce((n, stretch) => n + stretch.events.length, 0)).toBe(events);
    sent.push(checked.value);
    sizes.push(json.length);
  }, bounds);
  return { batch, sent, sizes };
}

/** The batches' events in order, as `runId:text`. */
const unpacked = (sent: RunEventsParams[]): string[] =>
  sent.flatMap((params) => params.runs.flatMap(({ runId, events }) => events.map((event) => `${runId}:${(event as { text: string }).text}`)));

describe('RunEventBatch', () => {
  it("sends a turn's events as one notification, in emission order across runs, consecutive events of a run in one stretch", async () => {
    const { batch, sent } = recordingBatch();
    batch.add('run_a', delta('1'));
    batch.add('run_a', delta('2'));
    batch.add('run_b', delta('3'));
    batch.add('run_a', delta('4'));
    expect(sent).toHaveLength(0); // nothing before the turn ends
    await turn();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.runs.map((stretch) => [stretch.runId, stretch.events.length])).toEqual([
      ['run_a', 2],
      ['run_b', 1],
      ['run_a', 1],
    ]);
    expect(unpacked(sent)).toEqual(['run_a:1', 'run_a:2', 'run_b:3', 'run_a:4']);
    batch.add('run_b', delta('5')); // the next turn: its own batch
    await turn();
    expect(sent).toHaveLength(2);
    expect(batch.size).toBe(0);
  });

  it('cuts a turn at the event bound, and keeps the order over the cut', async () => {
    const { batch, sent } = recordingBatch({ maxEvents: 3, maxChars: 1 << 20 });
    for (let i = 0; i < 7; i++) batch.add(i % 2 === 0 ? 'run_a' : 'run_b', delta(String(i)));
    expect(sent.map((p) => p.runs.reduce((n, s) => n + s.events.length, 0))).toEqual([3, 3]); // sent as the bound is reached
    await turn();
    expect(unpacked(sent)).toEqual(['run_a:0', 'run_b:1', 'run_a:2', 'run_b:3', 'run_a:4', 'run_b:5', 'run_a:6']);
  });

  it('cuts at the size bound; an event bigger than the bound goes alone', async () => {
    const maxChars = 2000;
    const { batch, sent, sizes } = recordingBatch({ maxEvents: 1000, maxChars });
    for (let i = 0; i < 30; i++) batch.add('run_a', delta(`${i}`.padEnd(100, '.')));
    batch.add('run_a', delta('big'.padEnd(5000, '!')));
    batch.add('run_a', delta('after'));
    await turn();
    expect(unpacked(sent)).toEqual([...Array.from({ length: 30 }, (_, i) => `run_a:${`${i}`.padEnd(100, '.')}`), `run_a:${'big'.padEnd(5000, '!')}`, 'run_a:after']);
    const alone = sent.findIndex((p) => (p.runs[0]!.events[0] as { text: string }).text.startsWith('big'));
    expect(sent[alone]!.runs.flatMap((s) => s.events)).toHaveLength(1);
    // Every batch of more than one event stays within the bound (plus the envelope).
    sizes.forEach((size, i) => {
      if (i !== alone) expect(size).toBeLessThanOrEqual(maxChars + 100);
    });
    expect(sent.length).toBeGreaterThanOrEqual(3);
  });

  it('keeps a JSON-awkward runId and text intact', async () => {
    const { batch, sent } = recordingBatch();
    batch.add('run_"q"\\', delta('line\n"quoted" ✓ \u2028'));
    batch.flush();
    expect(sent[0]!.runs).toEqual([{ runId: 'run_"q"\\', events: [delta('line\n"quoted" ✓ \u2028')] }]);
    await turn(); // the scheduled flush finds nothing
    expect(sent).toHaveLength(1);
  });
});

describe('a batch behind the connection writer', () => {
  it('is written before any later message, so an end never overtakes its run’s events', async () => {
    const { client, server } = await socketPair();
    let batch!: RunEventBatch;
    const writer = new CountingWriter(client, undefined, undefined, { beforeMessage: () => batch.flush() });
    batch = new RunEventBatch((json) => void writer.writeJson(json));
    const got = received(server, 4);
    batch.add('run_a', delta('a1'));
    batch.add('run_b', delta('b1'));
    void writer.write({ jsonrpc: '2.0', method: 'subagent/end', params: { runId: 'run_a' } } as Message);
    batch.add('run_b', delta('b2'));
    void writer.write({ jsonrpc: '2.0', id: 7, result: {} } as Message);
    const messages = (await got) as Array<Message & { method?: string; params?: { runs?: RunEventsParams['runs'] } }>;
    expect(messages.map((m) => m.method ?? 'reply')).toEqual(['run/events', 'subagent/end', 'run/events', 'reply']);
    expect(messages[0]!.params!.runs!.map((s) => s.runId)).toEqual(['run_a', 'run_b']);
    expect(messages[2]!.params!.runs).toEqual([{ runId: 'run_b', events: [delta('b2')] }]);
    expect(writer.unsent).toBe(0);
    writer.dispose();
  });

  it('counts a batch as one unsent message of its bytes', async () => {
    const { client, server } = await socketPair();
    const writer = new CountingWriter(client);
    const got = received(server, 1);
    let sent = '';
    const batch = new RunEventBatch((json) => void writer.writeJson((sent = json)));
    for (let i = 0; i < 50; i++) batch.add('run_a', delta('ü'));
    batch.flush();
    expect(writer.unsent).toBe(1);
    expect(writer.unsentBytes).toBe(frameOfJson(sent).bytes);
    expect(writer.unsentBytes).toBeGreaterThan(frameOfJson(sent).text.length); // bytes, not characters
    await got;
    expect(writer.unsent).toBe(0);
    writer.dispose();
  });
});

describe('RunEventBatch for a client that is not reading', () => {
  it('holds the events of a batch begun while the writer is backed up, sized exactly, and builds the same notification', async () => {
    const events: Array<[string, RunEvent]> = [
      ['run_a', delta('1 "quoted"\n')],
      ['run_a', delta('✓ ünïcode 😀')],
      ['run_b', { kind: 'session', event: { type: 'user/message', content: [{ type: 'text', text: 'hi\n' }] } } as RunEvent],
      ['run_a', delta('x'.repeat(1000))],
    ];
    const eager = recordingBatch();
    for (const [runId, event] of events) eager.batch.add(runId, event);
    await turn();
    const frames: Array<{ bytes: number; build: () => string; events: number }> = [];
    let backedUp = false;
    const held = new RunEventBatch({
      send: () => {
        throw new Error('a held batch is sent deferred');
      },
      backedUp: () => backedUp,
      sendDeferred: (frame, count) => frames.push({ ...frame, events: count }),
    });
    backedUp = true;
    for (const [runId, event] of events) held.add(runId, event);
    await turn();
    expect(frames).toHaveLength(1);
    const text = frames[0]!.build();
    expect(frames[0]!.bytes).toBe(Buffer.byteLength(text, 'utf8'));
    expect(frames[0]!.events).toBe(events.length);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { params: RunEventsParams };
    expect(body.params).toEqual(eager.sent[0]);
  });

  it('bounds a held batch by its bytes as it bounds one built as it goes', async () => {
    const frames: number[] = [];
    const held = new RunEventBatch({ send: () => undefined, backedUp: () => true, sendDeferred: (_frame, count) => frames.push(count) }, { maxEvents: 1024, maxChars: 1000 });
    for (let i = 0; i < 10; i++) held.add('run_a', delta('y'.repeat(300)));
    await turn();
    expect(frames.reduce((a, b) => a + b, 0)).toBe(10);
    expect(Math.max(...frames)).toBeLessThanOrEqual(3);
  });
});
