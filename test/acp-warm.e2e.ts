/**
 * The warm ACP pool through the real CLI and daemon processes: `warm: 2` in the config file keeps
 * two fixture agents initialized, `status` counts them, `run --provider` takes one (by pid, from
 * the agent's own record) and a replacement is warmed, `reload` with a changed config stops the
 * old warm agents and warms new ones with the new env, and `stop` leaves no agent behind.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentProcessesStatus } from '../protocol/index.js';
import { processGone, readRecord, recordedPids, SDK_AGENT } from './fixtures/acp-harness.js';
import { CliSandbox, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';

let box: CliSandbox;
let record: string;

const agentConfig = (warm: number, label: string) => ({
  providers: [
    {
      type: 'acp',
      name: 'warm-agent',
      command: process.execPath,
      args: [SDK_AGENT],
      env: { ACP_FIXTURE_MODE: 'echo', ACP_FIXTURE_RECORD: record, GENERATION: label },
      initializeTimeoutMs: 20_000,
      disposeGraceMs: { stdin: 2_000, term: 1_000 },
      warm,
    },
  ],
});

beforeAll(() => {
  box = new CliSandbox('subagentd-acp-warm-');
  record = `${box.root}/agent-record.jsonl`;
});
afterAll(async () => {
  const left = recordedPids(record).filter((pid) => !processGone(pid));
  for (const pid of left) process.kill(pid, 'SIGKILL');
  await box.cleanup();
  expect(left, 'agent processes left behind').toEqual([]);
});

async function agents(): Promise<AgentProcessesStatus | undefined> {
  return (await box.status())?.config?.agents?.['warm-agent'];
}

/** Pids that answered `initialize`, of the agents started with config generation `generation`. */
function initializedBy(generation: string): number[] {
  const entries = readRecord(record);
  const envOf = (pid: number): Record<string, string> | undefined =>
    entries.find((e) => e.event === 'start' && e['pid'] === pid)?.['env'] as Record<string, string> | undefined;
  return entries
    .filter((e) => e.event === 'initialize')
    .map((e) => e['pid'] as number)
    .filter((pid) => envOf(pid)?.['GENERATION'] === generation);
}

it('warms at start, serves a run from the pool, recycles on reload, and stops every agent', { timeout: 2 * HEAVY_TEST_MS }, async () => {
  const config = box.file('config.json', agentConfig(2, 'first'));
  const started = await box.run(['start', '--config', config]);
  expect(started.code, started.stderr).toBe(0);
  await waitUntil(async () => (await agents())?.ready === 2, 30_000, 'two warm agents ready');
  const warmPids = initializedBy('first');
  expect(warmPids).toHaveLength(2);
  const text = await box.run(['status']);
  expect(text.stdout).toMatch(/agents warm-agent\s+0 in use, 2 warm ready, 0 warming \(warm 2\)/);

  const ran = await box.run(['run', '--provider', 'warm-agent', '--quiet', 'hello'], { timeoutMs: 30_000 });
  expect(ran.code, ran.stderr).toBe(0);
  expect(ran.stdout).toBe('turn 1: hello\n');
  // The run's session was created in one of the processes warmed before it.
  const [served] = readRecord(record).filter((e) => e.event === 'session/new').map((e) => e['pid'] as number);
  expect(warmPids).toContain(served);
  expect((await agents())?.warmStarts).toBe(1);
  await waitUntil(async () => (await agents())?.ready === 2 && initializedBy('first').length === 3, 30_000, 'the replacement warm agent');
  await waitUntil(() => processGone(served!), 10_000, 'the used agent to be disposed');

  // A changed config: the old warm agents stop, new ones start with the new env.
  const before = initializedBy('first').filter((pid) => pid !== served);
  box.file('config.json', agentConfig(1, 'second'));
  const reload = await box.run(['reload', '--json']);
  expect(reload.code, reload.stderr).toBe(0);
  await waitUntil(() => before.every(processGone), 10_000, 'the old warm agents to stop');
  await waitUntil(async () => (await agents())?.ready === 1, 30_000, 'the reloaded pool to be warm');
  expect(await agents()).toMatchObject({ warm: 1, ready: 1, inUse: 0, warmStarts: 0 });
  expect(initializedBy('second')).toHaveLength(1);

  const stopped = await box.run(['stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
  await waitUntil(() => recordedPids(record).every(processGone), 10_000, 'every agent to be gone after stop');
});
