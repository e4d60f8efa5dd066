/**
 * client/inbound-order.ts: answers skip the library's queue but never overtake what was read
 * before them. The rules on their own, then a real client against a fake daemon on a unix socket
 * that writes a run's end and the reply to its dispose in one write.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Message } from 'vscode-jsonrpc/node';
import { connect } from '../client/index.js';
import { InboundOrder } from '../client/inbound-order.js';
import { encodeFrame, type EndParams } from '../protocol/index.js';
import { COMPLETED, FakeDaemon, descriptor } from './support/fake-daemon-peer.js';

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const note = (method: string): Message => ({ jsonrpc: '2.0', method }) as Message;
const answer = (id: number): Message => ({ jsonrpc: '2.0', id, result: {} }) as Message;
const name = (m: Message): string => ('method' in m ? (m as { method: string }).method : `answer ${(m as unknown as { id: number }).id}`);

describe('InboundOrder', () => {
  it('passes an answer at once while nothing waits in the queue, and holds one (and what follows) behind queued messages', () => {
    const passed: string[] = [];
    const order = new InboundOrder((m) => passed.push(name(m)));
    order.arrive(answer(1));
    expect(passed).toEqual(['answer 1']);
    expect(order.waiting).toBe(0);

    const end = note('subagent/end');
    order.arrive(end);
    order.arrive(answer(2));
    const later = note('run/events');
    order.arrive(later);
    expect(passed).toEqual(['answer 1', 'subagent/end']);
    expect(order.waiting).toBe(3);

    order.dispatched(end);
    expect(passed).toEqual(['answer 1', 'subagent/end', 'answer 2', 'run/events']);
    expect(order.waiting).toBe(1);
    order.dispatched(later);
    expect(order.waiting).toBe(0);
  });

  it("handles a run's end itself at the turn's check phase, an answer read after it held until then, never ahead of the library's queue", async () => {
    const passed: string[] = [];
    const handled: string[] = [];
    const order = new InboundOrder((m) => passed.push(name(m)), {
      takes: (m) => name(m) === 'subagent/end',
      handle: (m) => handled.push(name(m)) > 0,
    });
    const checkPhase = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    order.arrive(answer(1)); // at once: its caller continues before the end read with it
    order.arrive(note('subagent/end'));
    order.arrive(answer(2)); // behind the end
    expect(passed).toEqual(['answer 1']);
    expect(handled).toEqual([]);
    expect(order.waiting).toBe(2);
    await checkPhase();
    expect(handled).toEqual(['subagent/end']);
    expect(passed).toEqual(['answer 1', 'answer 2']);
    expect(order.waiting).toBe(0);

    const start = note('subagent/start');
    order.arrive(start); // not one it takes: queued in the library
    order.arrive(note('subagent/end')); // behind a queued message: the library's too
    await checkPhase();
    expect(handled).toEqual(['subagent/end']);
    expect(passed).toEqual(['answer 1', 'answer 2', 'subagent/start', 'subagent/end']);
  });

  it('gives the library a notification it could not handle (the connection gone)', async () => {
    const passed: string[] = [];
    const order = new InboundOrder((m) => passed.push(name(m)), { takes: () => true, handle: () => false });
    order.arrive(note('subagent/end'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(passed).toEqual(['subagent/end']);
  });

  it('never waits for a $/cancelRequest, nor counts a dispatch it did not queue', () => {
    const passed: string[] = [];
    const order = new InboundOrder((m) => passed.push(name(m)));
    const cancel = { jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 4 } } as Message;
    order.arrive(cancel);
    order.arrive(answer(3));
    expect(passed).toEqual(['$/cancelRequest', 'answer 3']);
    order.dispatched(cancel);
    order.dispatched(note('never queued'));
    expect(order.waiting).toBe(0);
  });
});

describe('a client reading an end and the reply to its dispose in one chunk', { timeout: 5000 }, () => {
  it('has the run settled before dispose resolves', async () => {
    const daemon = await FakeDaemon.start({
      providers: [descriptor('spawn')],
      handlers: {
        'run/dispose': (params: { runId: string }, { peer }) => {
          // The reply's id, as it crossed the wire: the latest run/dispose request in the raw bytes.
          const id = JSON.parse([...peer.rawText().matchAll(/"id":("d\d+"|\d+),"method":"run\/dispose"/g)].at(-1)![1]!) as string | number;
          const end: EndParams = { runId: params.runId, provider: 'spawn', id: `child-${params.runId}`, local: false, stopReason: 'completed', result: COMPLETED };
          peer.socket.write(Buffer.concat([encodeFrame({ jsonrpc: '2.0', method: 'subagent/end', params: end }), encodeFrame({ jsonrpc: '2.0', id, result: {} })]));
          return new Promise(() => undefined); // answered by the raw write above
        },
      },
    });
    cleanup.push(() => daemon.close());
    const service = await connect({ socket: daemon.socketPath, reconnect: false });
    cleanup.push(() => service.close());
    for (let round = 0; round < 5; round++) {
      const run = await service.start('spawn', { prompt: [{ type: 'text', text: 'hi' }], parent: { sessionId: 's', cwd: '/' }, signal: new AbortController().signal });
      let settled = false;
      void run.result.then(() => (settled = true));
      await run.dispose();
      expect(settled).toBe(true);
      await expect(run.result).resolves.toEqual(COMPLETED);
    }
  });
});
