/**
 * A configured ACP `cwd`, as the reference has it: it is the agent process's cwd **and** the cwd
 * of its ACP session (`session/new`), cold or warm. A relative one is resolved against the
 * daemon's launch directory when the config loads; an empty one is refused. The fixture agent
 * records its own cwd and the `session/new` it received.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSubagentService } from '../client/index.js';
import { processGone, readRecord, SDK_AGENT, waitFor } from './fixtures/acp-harness.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';

let daemon: DaemonProcess;
let launchDir: string;
let parentCwd: string;
const clients = new ClientPool();
const record = (name: string): string => join(launchDir, `${name}.jsonl`);

beforeAll(async () => {
  launchDir = realpathSync(mkdtempSync(join(tmpdir(), 'acp-cwd-launch-')));
  parentCwd = realpathSync(mkdtempSync(join(tmpdir(), 'acp-cwd-parent-')));
  mkdirSync(join(launchDir, 'agent-home'));
  const common = { type: 'acp', command: process.execPath, args: [SDK_AGENT], initializeTimeoutMs: 10_000, disposeGraceMs: { stdin: 2000, term: 1000 } };
  daemon = await startE2eDaemon(
    {
      providers: [
        { ...common, name: 'cold', cwd: 'agent-home', env: { ACP_FIXTURE_RECORD: record('cold') } },
        { ...common, name: 'warm', cwd: 'agent-home', warm: 1, env: { ACP_FIXTURE_RECORD: record('warm') } },
        { ...common, name: 'unset', env: { ACP_FIXTURE_RECORD: record('unset') } },
      ],
    },
    {},
    launchDir,
  );
});

afterAll(async () => {
  await clients.closeAll();
  await daemon?.stop();
  rmSync(launchDir, { recursive: true, force: true });
  rmSync(parentCwd, { recursive: true, force: true });
});

async function runOnce(service: RemoteSubagentService, provider: string): Promise<void> {
  const run = await service.start(provider, {
    prompt: [{ type: 'text', text: 'hello' }],
    parent: { sessionId: 'cwd-parent', cwd: parentCwd },
    signal: new AbortController().signal,
  });
  expect((await run.result).stopReason).toBe('completed');
  await run.dispose();
}

describe('a configured acp cwd', () => {
  it.each(['cold', 'warm'])('%s: a relative cwd is resolved against the launch dir and is the agent cwd and the session/new cwd', async (provider) => {
    const service = await clients.connect(daemon.socket);
    if (provider === 'warm') await waitFor(() => readRecord(record('warm')).some((e) => e.event === 'initialize'), 15_000, 'the warm agent');
    await runOnce(service, provider);
    const entries = readRecord(record(provider));
    const home = join(launchDir, 'agent-home');
    const started = entries.find((e) => e.event === 'start')!;
    expect(started['cwd']).toBe(home);
    const sessions = entries.filter((e) => e.event === 'session/new').map((e) => e['params']);
    expect(sessions).toEqual([{ cwd: home, mcpServers: [] }]);
    await waitFor(() => processGone(started['pid'] as number), 10_000, 'the agent to be reaped');
  });

  it('without a configured cwd, the agent and its session get the parent cwd', async () => {
    const service = await clients.connect(daemon.socket);
    await runOnce(service, 'unset');
    const entries = readRecord(record('unset'));
    expect(entries.find((e) => e.event === 'start')?.['cwd']).toBe(parentCwd);
    expect(entries.filter((e) => e.event === 'session/new').map((e) => e['params'])).toEqual([{ cwd: parentCwd, mcpServers: [] }]);
  });

  it('an empty cwd, or a relative one that does not exist under the launch dir, fails the daemon start', async () => {
    const entry = { type: 'acp', name: 'bad', command: process.execPath, args: [SDK_AGENT] };
    await expect(startE2eDaemon({ providers: [{ ...entry, cwd: '' }] }, {}, launchDir)).rejects.toThrow(/cwd/);
    await expect(startE2eDaemon({ providers: [{ ...entry, cwd: 'no-such-dir' }] }, {}, launchDir)).rejects.toThrow(
      `cwd ${join(launchDir, 'no-such-dir')} is not an existing directory`,
    );
  });
});
