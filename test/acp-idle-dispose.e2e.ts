/**
 * An ACP child whose turn is over is disposed promptly even when its agent ignores stdin EOF (as
 * codex-acp 0.16 and claude-agent-acp 0.23 do): with no prompt in flight the EOF grace is only
 * `disposeGraceMs.idleStdin`, then SIGTERM. The fixture agent here ignores EOF and records the
 * SIGTERM that ends it; the entry's `stdin` grace is far longer than the test may take, so
 * without the idle rule the dispose would not return in time. Process checks look at /proc.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import type { RemoteSubagentService } from '../client/index.js';
import { makeWorkspace, processGone, readRecord, recordedPids, SDK_AGENT, waitFor, type Workspace } from './fixtures/acp-harness.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { childPids, ClientPool, startE2eDaemon } from './support/e2e-daemon.js';

/** Longer than the test's own timeout: a dispose that waits it out fails the test. */
const LONG_STDIN_GRACE_MS = 60_000;

let daemon: DaemonProcess;
let ws: Workspace;
const clients = new ClientPool();

beforeAll(async () => {
  daemon = await startE2eDaemon({
    providers: [
      {
        type: 'acp',
        name: 'eof-deaf',
        command: process.execPath,
        args: [SDK_AGENT],
        env: { ACP_FIXTURE_IGNORE_EOF: '1' },
        initializeTimeoutMs: 10_000,
        disposeGraceMs: { stdin: LONG_STDIN_GRACE_MS, term: 5_000 },
      },
    ],
  });
});
afterAll(async () => {
  await daemon?.stop();
});
beforeEach(async () => {
  ws = await makeWorkspace();
});
afterEach(async () => {
  await clients.closeAll();
  await ws.cleanup();
});

it('a settled child whose agent ignores EOF is ended by SIGTERM after the short idle grace, and reaped', { timeout: 30_000 }, async () => {
  const service: RemoteSubagentService = await clients.connect(daemon.socket);
  const run = await service.start('eof-deaf', {
    prompt: [{ type: 'text', text: 'hello' }],
    parent: { sessionId: 'idle-dispose', cwd: ws.root },
    signal: new AbortController().signal,
    env: { ACP_FIXTURE_RECORD: ws.recordPath },
  });
  expect((await run.result).stopReason).toBe('completed');
  const pid = await waitFor(() => recordedPids(ws.recordPath)[0], 5000, 'the agent pid');
  expect(childPids(daemon.proc.pid!)).toContain(pid);
  await run.dispose();
  expect(processGone(pid)).toBe(true);
  expect(childPids(daemon.proc.pid!)).not.toContain(pid);
  // It saw EOF (the connection closed) and lived on until SIGTERM.
  const events = readRecord(ws.recordPath).map((e) => e.event);
  expect(events).toContain('closed');
  expect(events).toContain('sigterm');
});
