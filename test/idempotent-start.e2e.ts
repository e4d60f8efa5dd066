/**
 * Idempotent starts on one real daemon: a `subagent/start` repeated under its `idempotencyKey`
 * by the same parent session answers the run the first one made (same runId, now attached to
 * the repeating connection) and starts nothing; the same key from another parent session is a
 * start of its own and leaves the first run with its owner; a start whose answer was never read
 * is answered again, with its outcome, to the client that comes back with the key. The fixture
 * provider counts the children it started.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { RawPeer } from './support/raw-peer.js';

const prompt = (text: string): ContentBlock[] => [{ type: 'text', text }];
const session = (): { sessionId: string; cwd: string } => ({ sessionId: `idem-${randomUUID()}`, cwd: process.cwd() });
let daemon: DaemonProcess;
const clients = new ClientPool();
const bounded = (): AbortSignal => AbortSignal.timeout(30_000);

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 30_000 });
});
afterEach(() => clients.closeAll());
afterAll(() => daemon?.stop());

let probes = 0;
/** Children the fixture provider has started so far, these probes not counted. */
async function childrenStarted(): Promise<number> {
  probes += 1;
  const service = await clients.connect(daemon.socket);
  const run = await service.start('echo', { prompt: prompt('stats'), parent: session(), signal: bounded() });
  const { output } = await run.result;
  const text = output[0]?.type === 'text' ? output[0].text : '{}';
  return (JSON.parse(text) as { started: number }).started - probes;
}

describe('idempotent starts on a single daemon', () => {
  it('the same key twice from one parent session: one child, the same runId, attached to the second connection', async () => {
    const before = await childrenStarted();
    const parent = session();
    const idempotencyKey = randomUUID();
    const a = await clients.connect(daemon.socket);
    const b = await clients.connect(daemon.socket);
    const first = (await a.start('echo', { prompt: prompt('hang'), parent, idempotencyKey, signal: bounded() })) as RemoteSubagentRun;
    const cancelB = new AbortController();
    const again = await b.start('echo', { prompt: prompt('hang'), parent, idempotencyKey, signal: cancelB.signal });
    expect(again.id).toBe(first.id);
    expect(await childrenStarted()).toBe(before + 1);
    // The run moved to b: a no longer owns it, b cancels it and gets its outcome.
    await expect(first.wait()).rejects.toMatchObject({ code: 'NOT_OWNER' });
    cancelB.abort();
    expect(await again.result).toMatchObject({ stopReason: 'aborted' });
  }, 30_000);

  it('the same key from another parent session is a start of its own: the first run stays with its owner', async () => {
    const idempotencyKey = randomUUID();
    const a = await clients.connect(daemon.socket);
    const c = await clients.connect(daemon.socket);
    const cancelA = new AbortController();
    const first = (await a.start('echo', { prompt: prompt('hang'), parent: session(), idempotencyKey, signal: cancelA.signal })) as RemoteSubagentRun;
    const other = await c.start('echo', { prompt: prompt('echo mine'), parent: session(), idempotencyKey, signal: bounded() });
    expect(other.id).not.toBe(first.id);
    expect(await other.result).toMatchObject({ stopReason: 'completed', output: prompt('echo mine') });
    cancelA.abort();
    expect(await first.result).toMatchObject({ stopReason: 'aborted' });
    expect(await first.wait()).toMatchObject({ stopReason: 'aborted' });
  }, 30_000);

  it('a start whose answer was never read: the client that comes back with its key gets that run and its outcome, and nothing starts twice', async () => {
    const before = await childrenStarted();
    const parent = session();
    const idempotencyKey = randomUUID();
    // A client that sent the start and was gone before it read the answer.
    const lost = await RawPeer.initialized(daemon.socket, 'lost');
    const reply = await lost.request('subagent/start', { provider: 'echo', prompt: prompt('echo once'), parent, idempotencyKey });
    lost.close();
    const runId = (reply.result as { runId: string }).runId;
    const service = await clients.connect(daemon.socket);
    const again = await service.start('echo', { prompt: prompt('echo once'), parent, idempotencyKey, signal: bounded() });
    expect(again.id).toBe(runId);
    // Settled before this connection took it: its end notice comes again after the answer.
    expect(await again.result).toMatchObject({ stopReason: 'completed', output: prompt('echo once') });
    expect(await childrenStarted()).toBe(before + 1);
  }, 30_000);

  it('a key over 128 characters is refused with a typed error, and the daemon carries on', async () => {
    const peer = await RawPeer.initialized(daemon.socket, 'long-key');
    try {
      const reply = await peer.request('subagent/start', { provider: 'echo', prompt: prompt('echo x'), parent: session(), idempotencyKey: 'k'.repeat(129) });
      expect(reply.error).toMatchObject({ code: -32602 });
      expect(JSON.stringify(reply.error)).toContain('idempotencyKey');
    } finally {
      peer.close();
    }
    expect(await childrenStarted()).toBeGreaterThanOrEqual(0);
  }, 30_000);
});
