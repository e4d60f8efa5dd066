/**
 * A continuable child on an ACP provider: a later message prompts the same ACP session of the
 * same agent process again; after a daemon restart it cannot be brought back (NOT_RESUMABLE).
 */
import { afterEach, expect, it } from 'vitest';
import type { ChildSettledNotice } from '../client/index.js';
import { makeWorkspace, recordedPids, SDK_AGENT, type Workspace } from './fixtures/acp-harness.js';
import { restartDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';
import { rejection } from './support/assertions.js';
import { waitFor } from './support/scripted-fixtures.js';

const KEY = 'owner-key-of-the-acp-test-0123456789';
const text = (value: string) => [{ type: 'text' as const, text: value }];
const clients = new ClientPool();
let daemon: DaemonProcess | undefined;
let ws: Workspace | undefined;
afterEach(async () => {
  await clients.closeAll();
  await daemon?.stop();
  await ws?.cleanup();
});

it('an ACP continuable child answers a later message in the same session, and is not resumable after a restart', async () => {
  ws = await makeWorkspace();
  const provider = { type: 'acp', name: 'sdk-agent', command: process.execPath, args: [SDK_AGENT], initializeTimeoutMs: 5000 };
  daemon = await startE2eDaemon({ providers: [provider] });
  const children = (await clients.connect(daemon.socket, { ownerKey: KEY })).children!;
  const notices: ChildSettledNotice[] = [];
  children.onSettled((notice) => void notices.push(notice));
  const parent = { sessionId: 'acp-parent', cwd: ws.root };
  const { childId } = await children.start('sdk-agent', {
    prompt: text('first'),
    parent,
    label: 'acp',
    signal: new AbortController().signal,
    env: { ACP_FIXTURE_MODE: 'echo', ACP_FIXTURE_RECORD: ws.recordPath },
  });
  await waitFor(() => notices.length === 1, 10_000);
  expect(notices[0]!.text).toBe('acp finished. Its closing message:\nturn 1: first');
  await children.sendMessage(childId, text('second'), parent);
  await waitFor(() => notices.length === 2, 10_000);
  expect(notices[1]!.text).toBe('acp finished. Its closing message:\nturn 2: second');
  // One agent process for both turns ("turn 2" is the agent's own count of its session's prompts).
  expect(recordedPids(ws.recordPath)).toHaveLength(1);

  await clients.closeAll();
  const exited = new Promise((resolve) => daemon!.proc.once('exit', resolve));
  daemon.proc.kill('SIGTERM');
  await exited;
  daemon = await restartDaemon(daemon, {});
  const again = (await clients.connect(daemon.socket, { ownerKey: KEY })).children!;
  expect((await again.list(parent)).entries).toMatchObject([{ id: childId, status: 'idle', label: 'acp' }]);
  const refused = await rejection(again.sendMessage(childId, text('third'), parent));
  expect(refused.code).toBe('NOT_RESUMABLE');
  expect(refused.message).toContain('cannot restore');
});
