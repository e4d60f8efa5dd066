/**
 * A run's end on the wire of a real daemon process, by the client's protocol minor: a client of
 * 1.3 gets the output twice (`lastAssistantMessage` beside `result`), a client of 1.4 once (in
 * `result`), and the client library's `subagent/end` event carries `lastAssistantMessage` either way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type SubagentEndEvent } from '../client/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const parent = { sessionId: 'end-once', cwd: '/tmp' };
const prompt = (text: string): ContentBlock[] => [{ type: 'text', text }];
let daemon: DaemonProcess;

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
});
afterAll(async () => {
  await daemon?.stop();
});

async function endOf(peer: RawPeer, text: string): Promise<Record<string, unknown>> {
  const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt(text), parent });
  const { runId } = reply.result as { runId: string };
  const end = await peer.waitFor((m) => m.method === 'subagent/end' && (m.params as { runId: string }).runId === runId, 10_000, `the end of ${text}`);
  return end.params as Record<string, unknown>;
}

describe('subagent/end by protocol minor', () => {
  it('a 1.3 client gets lastAssistantMessage beside result; a 1.4 client gets the output once, in result', async () => {
    const old = await RawPeer.initialized(daemon.socket, 'old', '1.3.0');
    const current = await RawPeer.initialized(daemon.socket, 'current', '1.4.0');
    try {
      const before = await endOf(old, 'echo twice');
      expect(before['lastAssistantMessage']).toEqual(prompt('echo twice'));
      expect((before['result'] as { output: ContentBlock[] }).output).toEqual(prompt('echo twice'));
      const now = await endOf(current, 'echo once');
      expect(now).not.toHaveProperty('lastAssistantMessage');
      expect((now['result'] as { output: ContentBlock[] }).output).toEqual(prompt('echo once'));
      expect(now['stopReason']).toBe('completed');
    } finally {
      old.close();
      current.close();
    }
  });

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
