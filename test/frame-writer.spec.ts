/**
 * The shared frame writer on a real unix socket: a tick's messages leave in one socket write
 * (not two writes per message, as vscode-jsonrpc's writer makes), the peer's vscode-jsonrpc reader
 * decodes them whole and in order, frame sizes count bytes (not characters), and a write to a
 * closed socket resolves and is reported on `onError` instead of rejecting.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Message } from 'vscode-jsonrpc/node';
import { FrameWriter } from '../common/frame-writer.js';
import { frameOf } from '../protocol/framing.js';
import { EndNotification } from '../protocol/index.js';
import { CountingWriter } from '../daemon/connection/counting-writer.js';
import { received, useSocketPairs } from './support/socket-pair.js';

const socketPair = useSocketPairs();
afterEach(() => {
  vi.restoreAllMocks();
});

const note = (n: number, text = 'x'): Message => ({ jsonrpc: '2.0', method: 'test/note', params: { n, text } }) as Message;

describe('FrameWriter', () => {
  it("writes a tick's first message at once and the rest of the tick in one more write, decoded whole and in order", async () => {
    const { client, server } = await socketPair();
    const writes = vi.spyOn(client, 'write');
    const writer = new FrameWriter(client);
    const got = received(server, 5);
    const first = writer.write(note(1));
    // Written when queued: a client waits on its request, and the tick may go on for a while.
    expect(writes).toHaveBeenCalledTimes(1);
    await Promise.all([first, writer.write(note(2, 'é ünïcode ✓')), writer.write(note(3))]);
    expect(writes).toHaveBeenCalledTimes(2);
    await Promise.all([writer.write(note(4)), writer.write(note(5))]); // the next tick: its own first write, then the rest
    expect(writes).toHaveBeenCalledTimes(4);
    const params = (await got).map((m) => (m as unknown as { params: { n: number; text: string } }).params);
    expect(params.map((p) => p.n)).toEqual([1, 2, 3, 4, 5]);
    expect(params[1]!.text).toBe('é ünïcode ✓');
    writer.dispose();
  });

  it('counts frame sizes in bytes', () => {
    const frame = frameOf(note(1, 'ü✓'.repeat(10)));
    expect(frame.bytes).toBe(Buffer.byteLength(frame.text, 'utf8'));
    expect(frame.bytes).toBeGreaterThan(frame.text.length);
    const body = frame.text.slice(frame.text.indexOf('\r\n\r\n') + 4);
    expect(frame.text.startsWith(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`)).toBe(true);
  });

  it('resolves a write to a closed socket and reports it on onError', async () => {
    const { client } = await socketPair();
    const writer = new FrameWriter(client);
    const errors: Error[] = [];
    writer.onError(([error]) => errors.push(error));
    client.destroy();
    await expect(writer.write(note(1))).resolves.toBeUndefined();
    expect(errors.map((e) => e.message)).toContain('the connection is closed');
    writer.dispose();
  });
});

describe('FrameWriter beforeWrite (the daemon writes its run records there)', () => {
  it('runs once before each batch reaches the socket, never for an empty batch or a closed socket', async () => {
    const { client, server } = await socketPair();
    const order: string[] = [];
    const write = client.write.bind(client);
    vi.spyOn(client, 'write').mockImplementation(((...args: Parameters<typeof client.write>) => {
      order.push('socket');
      return write(...args);
    }) as typeof client.write);
    const writer = new FrameWriter(client, 'turn', () => order.push('before'));
    const got = received(server, 3);
    await Promise.all([writer.write(note(1)), writer.write(note(2))]);
    await writer.write(note(3));
    expect(order).toEqual(['before', 'socket', 'before', 'socket']);
    expect(await got).toHaveLength(3);
    client.destroy();
    await writer.write(note(4));
    expect(order).toHaveLength(4);
    writer.dispose();
  });
});

describe('CountingWriter', () => {
  it('writes a reply at once with what was queued before it; what its queued hook starts follows in order', async () => {
    const { client, server } = await socketPair();
    const writes = vi.spyOn(client, 'write');
    const got = received(server, 3);
    let followed: Promise<void> | undefined;
    const writer: CountingWriter = new CountingWriter(client, undefined, undefined, {
      queued: (message) => {
        // The daemon's rule: a run's end follows the reply that hands the run over.
        if ((message as { id?: unknown }).id === 7) followed = Promise.resolve().then(() => writer.write(note(2)));
      },
    });
    const before = writer.write(note(1));
    expect(writes).not.toHaveBeenCalled(); // a notification waits for the turn's batch
    const reply = writer.write({ jsonrpc: '2.0', id: 7, result: { runId: 'r' } } as Message);
    expect(followed).toBeDefined();
    expect(writes).toHaveBeenCalledTimes(1); // the reply did not wait for the turn, and took the note along
    await Promise.all([before, reply, followed]);
    expect(writes).toHaveBeenCalledTimes(2);
    expect((await got).map((m) => ('id' in m ? 'reply' : (m as unknown as { params: { n: number } }).params.n))).toEqual([1, 'reply', 2]);
    writer.dispose();
  });

  it("writes a run's end at once with what was queued before it, and other notifications in the turn's batch", async () => {
    const { client, server } = await socketPair();
    const writes = vi.spyOn(client, 'write');
    const got = received(server, 3);
    const writer = new CountingWriter(client);
    const before = writer.write(note(1));
    expect(writes).not.toHaveBeenCalled();
    const end = writer.write({ jsonrpc: '2.0', method: EndNotification.method, params: { runId: 'r' } } as Message);
    expect(writes).toHaveBeenCalledTimes(1); // the end did not wait for the turn, and took the note along
    const after = writer.write(note(2));
    expect(writes).toHaveBeenCalledTimes(1);
    await Promise.all([before, end, after]);
    expect(writes).toHaveBeenCalledTimes(2);
    expect((await got).map((m) => (m as unknown as { method: string; params: { n?: number } }).params.n ?? 'end')).toEqual([1, 'end', 2]);
    writer.dispose();
  });

  it("keeps a reply and a run's end in the turn's batch when atOnce says the client is busy", async () => {
    const { client, server } = await socketPair();
    const writes = vi.spyOn(client, 'write');
    const got = received(server, 3);
    const writer = new CountingWriter(client, undefined, undefined, { atOnce: () => false });
    const end = writer.write({ jsonrpc: '2.0', method: EndNotification.method, params: { runId: 'r' } } as Message);
    const reply = writer.write({ jsonrpc: '2.0', id: 7, result: {} } as Message);
    const after = writer.write(note(1));
    expect(writes).not.toHaveBeenCalled();
    await Promise.all([end, reply, after]);
    expect(writes).toHaveBeenCalledTimes(1);
    expect((await got).map((m) => ('id' in m ? 'reply' : (m as unknown as { params: { n?: number } }).params.n === undefined ? 'end' : 'note'))).toEqual(['end', 'reply', 'note']);
    writer.dispose();
  });

  it("tells waitedOn of each reply and run's end, never of other notifications (what the poll spin hears as an answer)", async () => {
    const { client } = await socketPair();
    const heard: string[] = [];
    const writer = new CountingWriter(client, undefined, undefined, { waitedOn: () => heard.push('answer'), atOnce: () => false });
    await Promise.all([
      writer.write(note(1)),
      writer.write({ jsonrpc: '2.0', method: EndNotification.method, params: { runId: 'r' } } as Message),
      writer.write(note(2)),
      writer.write({ jsonrpc: '2.0', id: 7, result: {} } as Message),
      writer.write({ jsonrpc: '2.0', method: 'run/events', params: {} } as Message),
    ]);
    expect(heard).toEqual(['answer', 'answer']);
    writer.dispose();
  });

  it("writes one event-loop turn's messages in one socket write, across ticks", async () => {
    const { client, server } = await socketPair();
    const writes = vi.spyOn(client, 'write');
    const writer = new CountingWriter(client);
    const got = received(server, 3);
    const first = writer.write(note(1));
    await new Promise<void>((resolve) => process.nextTick(resolve)); // a later tick, the same turn
    const rest = [writer.write(note(2)), writer.write(note(3))];
    await Promise.all([first, ...rest]);
    expect(writes).toHaveBeenCalledTimes(1);
    expect((await got).map((m) => (m as unknown as { params: { n: number } }).params.n)).toEqual([1, 2, 3]);
    writer.dispose();
  });

  it('counts unsent messages and bytes until the turn’s write is taken', async () => {
    const { client, server } = await socketPair();
    const writer = new CountingWriter(client);
    const got = received(server, 2);
    const first = writer.write(note(1, 'ü'));
    const second = writer.write(note(2));
    expect(writer.unsent).toBe(2);
    expect(writer.unsentBytes).toBe(frameOf(note(1, 'ü')).bytes + frameOf(note(2)).bytes);
    await Promise.all([first, second]);
    expect(writer.unsent).toBe(0);
    expect(writer.unsentBytes).toBe(0);
    expect(await got).toHaveLength(2);
    writer.dispose();
  });
});

describe('a peer that is not reading (frames wait for its drain; a run’s end and held batches are built then)', () => {
  /** Writes 1 MiB notes until the socket's buffer is past its high-water mark: the peer has not read. */
  async function backUp(writer: CountingWriter): Promise<number> {
    let notes = 0;
    while (!writer.backedUp) {
      void writer.write(note(++notes, 'x'.repeat(1024 * 1024)));
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return notes;
  }

  it("keeps a run's end unserialised until the peer reads, counts its exact bytes, and delivers everything in order", async () => {
    const { client, server } = await socketPair();
    server.pause();
    const writer = new CountingWriter(client);
    const notes = await backUp(writer);
    let reads = 0;
    const output = 'answer "quoted"\n✓ '.repeat(20_000);
    const params = { runId: 'r' } as Record<string, unknown>;
    Object.defineProperty(params, 'output', { enumerable: true, get: () => (reads++, output) });
    const end = { jsonrpc: '2.0', method: EndNotification.method, params } as Message;
    const before = writer.unsentBytes;
    const sent = writer.write(end);
    const after = writer.write(note(0));
    // Measured for the byte bound, not serialised: the frame is built when the peer reads.
    expect(reads).toBe(1);
    expect(writer.unsentBytes - before).toBe(frameOf(end).bytes + frameOf(note(0)).bytes);
    reads = 0;
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(reads).toBe(0);
    const got = received(server, notes + 2);
    server.resume();
    await Promise.all([sent, after]);
    expect(reads).toBe(1); // serialised once the peer read
    expect(writer.unsent).toBe(0);
    expect(writer.unsentBytes).toBe(0);
    const messages = await got;
    expect(messages.map((m) => (m as { method?: string }).method === EndNotification.method ? 'end' : (m as unknown as { params: { n: number } }).params.n)).toEqual([
      ...Array.from({ length: notes }, (_, i) => i + 1),
      'end',
      0,
    ]);
    expect((messages[notes] as unknown as { params: { output: string } }).params.output).toBe(output);
    writer.dispose();
  });

  it('settles the frames held for a peer whose socket closes, reporting the failure', async () => {
    const { client, server } = await socketPair();
    server.pause();
    const writer = new CountingWriter(client);
    await backUp(writer);
    const errors: Error[] = [];
    writer.onError(([error]) => errors.push(error));
    const held = writer.write({ jsonrpc: '2.0', method: EndNotification.method, params: { runId: 'r' } } as Message);
    client.destroy();
    await expect(held).resolves.toBeUndefined();
    expect(errors.length).toBeGreaterThan(0);
    writer.dispose();
  });
});
