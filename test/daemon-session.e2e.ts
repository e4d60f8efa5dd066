/**
 * `daemon/session`: the operator's read of any run's stored session log, through the daemon (the
 * CLI's `inspect` of a run it does not own and the ACP face's replay use it; neither reads state
 * files behind the daemon's back). A real daemon, a spawn run on the scripted model, three
 * connections: the owner, a bystander, and a raw peer for bad params.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { connect, type RemoteSubagentRun, type RemoteSubagentService } from '../client/index.js';
import { SubagentError } from '../protocol/index.js';
import { spawnSync } from 'node:child_process';
import { cleanEnv, EXAMPLES, MAIN } from './support/cli-harness.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

let daemon: DaemonProcess;
const services: RemoteSubagentService[] = [];
const elsewhere = mkdtempSync(join(tmpdir(), 'subagentd-session-elsewhere-'));

afterAll(async () => {
  await Promise.allSettled(services.map((s) => s.close()));
  await daemon?.stop();
  rmSync(elsewhere, { recursive: true, force: true });
});

it('serves any run\'s stored log to any connection, refuses unknown runs and bad params, and backs `inspect`', async () => {
  daemon = await startDaemon();
  const owner = await connect({ socket: daemon.socket });
  const bystander = await connect({ socket: daemon.socket });
  services.push(owner, bystander);
  const run = (await owner.start('spawn', {
    prompt: [{ type: 'text', text: 'Summarise this repository' }],
    parent: { sessionId: 'owner-session', cwd: EXAMPLES },
    agentOptions: { model: `scripted:${join(EXAMPLES, 'hello.json')}` },
    signal: new AbortController().signal,
  })) as RemoteSubagentRun;
  expect((await run.result).stopReason).toBe('completed');

  // The owner's view carries the session; the bystander's does not, but the operator's read does.
  expect((await bystander.ops.inspect(run.id)).events).toBeUndefined();
  const log = await bystander.ops.session(run.id);
  expect(log.header).toMatchObject({ id: run.childId, provider: 'spawn', parentSession: 'owner-session' });
  expect(log.events.find((e) => e.type === 'user/message')).toMatchObject({ content: [{ type: 'text', text: 'Summarise this repository' }] });
  expect(log.events.at(-1)).toMatchObject({ type: 'turn/end' });
  expect(log.events).toEqual((await owner.ops.inspect(run.id)).events);

  await expect(bystander.ops.session('run_nosuchrun0000000000000000')).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
  await expect(bystander.ops.session('run_nosuchrun0000000000000000')).rejects.toBeInstanceOf(SubagentError);

  const raw = await RawPeer.initialized(daemon.socket);
  try {
    const bad = await raw.request('daemon/session', { runId: 42 });
    expect(bad.error?.data).toMatchObject({ code: 'INVALID_REQUEST', field: '/runId' });
  } finally {
    raw.close();
  }

  // The CLI's inspect of a run it does not own asks the daemon: a state dir of its own that holds
  // no session logs changes nothing.
  const shown = spawnSync(process.execPath, [MAIN, 'inspect', run.id, '--json', '--socket', daemon.socket, '--state-dir', elsewhere], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(shown.status, shown.stderr).toBe(0);
  expect((JSON.parse(shown.stdout) as { events: unknown[] }).events).toEqual(log.events);
});
