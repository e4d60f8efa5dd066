/**
 * ACP children started through a real daemon process by the real client: the daemon spawns the
 * fixture agents (one built on the ACP SDK, one hand-written), relays their permission prompts
 * to the client's `onPermission`, cancels, disposes and reaps them. The fixtures append what they
 * saw (pid, env, cwd, cancel, permission answers) to a record file; process checks look at the
 * kernel (/proc), not at the code.
 */
import { existsSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type ClientStartRequest,
  type ContentBlock,
  type PermissionParams,
  type PermissionResult,
  type RemoteSubagentRun,
  type RemoteSubagentService,
  type RunEvent,
  type SubagentEndEvent,
} from '../client/index.js';
import {
  makeWorkspace,
  processGone,
  RAW_AGENT,
  readRecord,
  recordedPids,
  SDK_AGENT,
  waitFor,
  type Workspace,
} from './fixtures/acp-harness.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { childPids, ClientPool, RunPool, since, startE2eDaemon } from './support/e2e-daemon.js';
import { rejection } from './support/assertions.js';

const DETACH_GRACE_MS = 200;
/** Put in the daemon's env: an ACP agent must never see it. */
const LEAKY_SECRET = 'sk-must-not-reach-the-agent';

let daemon: DaemonProcess;
let ws: Workspace;
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  const common = { type: 'acp', command: process.execPath, initializeTimeoutMs: 5000, permission: 'ask' };
  daemon = await startE2eDaemon(
    {
      detachGraceMs: DETACH_GRACE_MS,
      providers: [
        { ...common, name: 'sdk-agent', args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'reply' }, disposeGraceMs: { stdin: 2000, term: 1000 } },
        { ...common, name: 'raw-agent', args: [RAW_AGENT], disposeGraceMs: { stdin: 2000, term: 1000 } },
        // A short kill ladder, for an agent that ignores stdin closing and SIGTERM.
        { ...common, name: 'sdk-agent-short-ladder', args: [SDK_AGENT], disposeGraceMs: { stdin: 150, term: 150 } },
      ],
    },
    { OPENAI_API_KEY: LEAKY_SECRET, MY_SERVICE_TOKEN: LEAKY_SECRET },
  );
});

afterAll(async () => {
  await daemon?.stop();
});

beforeEach(async () => {
  ws = await makeWorkspace();
});

afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
  await ws.cleanup();
});

// ---------------------------------------------------------------------------------------------
// Helpers

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
const textOf = (blocks: readonly ContentBlock[]): string => blocks.map((b) => (b.type === 'text' ? b.text : '')).join('');

function client(onPermission?: (request: PermissionParams) => PermissionResult | Promise<PermissionResult>): Promise<RemoteSubagentService> {
  return clients.connect(daemon.socket, onPermission ? { onPermission } : {});
}

/** Starts a run; `mode` selects the fixture's behaviour (through the start's env), the record file is per test. */
async function start(
  service: RemoteSubagentService,
  provider: string,
  mode: string | undefined,
  request: Partial<ClientStartRequest> = {},
): Promise<RemoteSubagentRun> {
  const run = await service.start(provider, {
    prompt: text('hello'),
    parent: { sessionId: 'acp-parent', cwd: ws.root },
    signal: new AbortController().signal,
    env: { ACP_FIXTURE_RECORD: ws.recordPath, ...(mode !== undefined && { ACP_FIXTURE_MODE: mode }) },
    ...request,
  });
  return runs.track(run as RemoteSubagentRun);
}

/** The agent process of this test's (only) run, from the fixture's own report. */
async function agentPid(): Promise<number> {
  return waitFor(() => recordedPids(ws.recordPath)[0], 5000, 'the agent to record its pid');
}

const alive = (pid: number): boolean => !processGone(pid);

// ---------------------------------------------------------------------------------------------

describe('acp children through the daemon', () => {
  it('happy path: output, stop reason, streamed events; a scrubbed env, the parent cwd; dispose reaps the agent', async () => {
    const service = await client();
    const ends: SubagentEndEvent[] = [];
    service.on('subagent/end', (e) => void ends.push(e));
    const events: RunEvent[] = [];
    const run = await start(service, 'sdk-agent', undefined, { onEvent: (e) => void events.push(e) });
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('Hello, world') });
    expect(events.filter((e) => e.kind === 'reasoning-delta')).toEqual([{ kind: 'reasoning-delta', text: 'pondering' }]);
    expect(events.flatMap((e) => (e.kind === 'text-delta' ? [e.text] : []))).toEqual(['Hel', 'lo, ', 'world']);
    await waitFor(() => ends.length === 1, 2000, 'subagent/end');
    expect(ends[0]).toMatchObject({ runId: run.id, provider: 'sdk-agent', local: false, stopReason: 'completed', lastAssistantMessage: text('Hello, world') });

    // What the agent saw: the config's env (mode "reply"), the start's env, nothing of the daemon's secrets.
    const started = readRecord(ws.recordPath).find((e) => e.event === 'start')!;
    const env = started['env'] as Record<string, string>;
    expect(env['ACP_FIXTURE_MODE']).toBe('reply');
    expect(env['ACP_FIXTURE_RECORD']).toBe(ws.recordPath);
    expect(env['OPENAI_API_KEY']).toBeUndefined();
    expect(env['MY_SERVICE_TOKEN']).toBeUndefined();
    expect(JSON.stringify(env)).not.toContain(LEAKY_SECRET);
    expect(started['cwd']).toBe(ws.root);
    const sessionNew = readRecord(ws.recordPath).find((e) => e.event === 'session/new')!;
    expect(sessionNew['params']).toMatchObject({ cwd: ws.root, mcpServers: [] });

    const pid = started['pid'] as number;
    expect(childPids(daemon.proc.pid!)).toContain(pid);
    await run.dispose();
    expect(processGone(pid)).toBe(true);
    expect(childPids(daemon.proc.pid!)).not.toContain(pid);
  });

  it('a hand-written agent works too, and its permission prompt is relayed to onPermission and honoured', async () => {
    const asked: PermissionParams[] = [];
    const service = await client((request) => {
      asked.push(request);
      return { outcome: 'selected', optionId: 'nope' };
    });
    const run = await start(service, 'raw-agent', undefined, { prompt: text('touch it') });
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('permission nope') });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      runId: run.id,
      title: 'Touch file',
      options: [
        { optionId: 'ok', name: 'Allow', kind: 'allow_once' },
        { optionId: 'nope', name: 'Reject', kind: 'reject_once' },
      ],
    });
    expect(readRecord(ws.recordPath).filter((e) => e.event === 'permission')).toEqual([{ event: 'permission', choice: 'nope' }]);
  });

  it('the SDK agent gets exactly the option the client chose (not a policy default)', async () => {
    const asked: PermissionParams[] = [];
    const service = await client(async (request) => {
      asked.push(request);
      await new Promise((r) => setTimeout(r, 50)); // an async handler, as a UI would be
      return { outcome: 'selected', optionId: 'yes-always' };
    });
    const run = await start(service, 'sdk-agent', 'permission');
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: 'completed', output: text('permission: yes-always') });
    expect(asked.map((a) => [a.title, a.options.map((o) => o.optionId)])).toEqual([['Edit config.json', ['no-never', 'yes-always', 'no', 'yes']]]);
    const answered = readRecord(ws.recordPath).filter((e) => e.event === 'permission');
    expect(answered).toEqual([{ event: 'permission', outcome: { outcome: 'selected', optionId: 'yes-always' } }]);
  });

  it('a client without onPermission answers cancelled: nothing is granted', async () => {
    const service = await client();
    const run = await start(service, 'sdk-agent', 'permission');
    const result = await run.result;
    expect(result.stopReason).toBe('aborted');
    expect(readRecord(ws.recordPath).filter((e) => e.event === 'permission')).toEqual([{ event: 'permission', outcome: { outcome: 'cancelled' } }]);
  });

  it('cancel through the AbortSignal settles aborted promptly and tells the agent (session/cancel)', async () => {
    const service = await client();
    const controller = new AbortController();
    const events: RunEvent[] = [];
    const run = await start(service, 'sdk-agent', 'slow', { signal: controller.signal, onEvent: (e) => void events.push(e) });
    await waitFor(() => events.some((e) => e.kind === 'text-delta'), 5000, 'the agent to start working');
    const t0 = performance.now();
    controller.abort();
    const result = await run.result;
    // The agent would work on for 30 s: the run settles without waiting for it.
    expect(since(t0)).toBeLessThan(2000);
    expect(result).toMatchObject({ stopReason: 'aborted', output: text('working...') });
    await waitFor(() => readRecord(ws.recordPath).some((e) => e.event === 'cancel'), 3000, 'the agent to see session/cancel');
  });

  it('resume sends another prompt to the same agent process', async () => {
    const service = await client();
    const run = await start(service, 'sdk-agent', 'echo', { prompt: text('first') });
    expect((await run.result).output).toEqual(text('turn 1: first'));
    expect('sendMessage' in run).toBe(false);
    const next = runs.track((await run.resume!(text('second'))) as RemoteSubagentRun);
    expect(next.id).not.toBe(run.id);
    expect(await next.result).toMatchObject({ stopReason: 'completed', output: text('turn 2: second') });
    // One process for the whole chain.
    expect(recordedPids(ws.recordPath)).toHaveLength(1);
  });

  // The reference's mapping: end_turn → completed, max_tokens → max-tokens, refusal → refusal,
  // cancelled → aborted; max_turn_requests (a request cap, not a token ceiling) and unknown → error.
  it.each([
    ['max_tokens', 'max-tokens'],
    ['refusal', 'refusal'],
    ['max_turn_requests', 'error'],
    ['something_new', 'error'],
  ])('the agent stop reason %s is %s', async (agentReason, stopReason) => {
    const service = await client();
    const run = await start(service, 'sdk-agent', `stop:${agentReason}`);
    const result = await run.result;
    expect(result.stopReason).toBe(stopReason);
    expect(textOf(result.output)).toBe('partial');
  });

  it('dispose of a running agent kills and reaps it', async () => {
    const service = await client();
    const run = await start(service, 'sdk-agent', 'slow');
    const pid = await agentPid();
    expect(alive(pid)).toBe(true);
    expect(childPids(daemon.proc.pid!)).toContain(pid);
    const t0 = performance.now();
    await run.dispose();
    expect(since(t0)).toBeLessThan(3000);
    expect(processGone(pid)).toBe(true);
    expect((await run.result).stopReason).toBe('aborted');
  });

  it('an agent that ignores stdin closing and SIGTERM is SIGKILLed by the ladder and reaped', async () => {
    const service = await client();
    const run = await start(service, 'sdk-agent-short-ladder', 'stubborn');
    expect((await run.result).stopReason).toBe('completed');
    const pid = await agentPid();
    await run.dispose();
    expect(processGone(pid)).toBe(true);
    // It saw SIGTERM and survived it; only SIGKILL ended it.
    expect(readRecord(ws.recordPath).some((e) => e.event === 'sigterm')).toBe(true);
  });

  it('a crashing agent ends the run in error with its exit and stderr tail in the diagnostic', async () => {
    const service = await client();
    const run = await start(service, 'sdk-agent', 'crash');
    const pid = await agentPid();
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.output).toEqual(text('partial answer'));
    expect(result.diagnostic).toContain('fixture: fatal error in the model client');
    expect(result.diagnostic).toContain(`agent (pid ${pid}) exited with code 3`);
    await waitFor(() => processGone(pid), 3000, 'the crashed agent to be reaped');
  });

  it("a client that disconnects mid-run has its agent reaped after the daemon's detach grace", async () => {
    const observer = await client();
    const owner = await client();
    const run = await start(owner, 'sdk-agent', 'slow');
    const pid = await agentPid();
    const t0 = performance.now();
    await owner.close();
    // Within the grace the run waits for its owner to re-attach.
    await new Promise((r) => setTimeout(r, DETACH_GRACE_MS / 4));
    expect(alive(pid)).toBe(true);
    await waitFor(() => processGone(pid), 5000, 'the detached agent to be reaped');
    expect(since(t0)).toBeGreaterThanOrEqual(DETACH_GRACE_MS - 20);
    const inspected = await observer.ops.inspect(run.id);
    expect(inspected.run).toMatchObject({ state: 'disposed', stopReason: 'aborted', mine: false });
  });

  it('the descriptor is truthful, and a start needing an unsupported capability spawns nothing', async () => {
    const service = await client();
    expect(service.list()).toEqual(expect.arrayContaining(['spawn', 'fork', 'sdk-agent', 'raw-agent']));
    const descriptor = service.getProvider('sdk-agent');
    expect(descriptor).toMatchObject({
      name: 'sdk-agent',
      inheritsParentContext: false,
      capabilities: { persona: false, toolFilter: false },
      runtime: { sendMessage: false, resume: true },
    });

    const persona = await rejection(start(service, 'sdk-agent', 'reply', { persona: 'You are terse.' }));
    expect(persona.code).toBe('UNSUPPORTED_CAPABILITY');
    expect(persona.details.field).toBe('/persona');
    const filter = await rejection(start(service, 'sdk-agent', 'reply', { toolFilter: { deny: ['read_file'] } }));
    expect(filter.code).toBe('UNSUPPORTED_CAPABILITY');
    expect(filter.details.field).toBe('/toolFilter');
    // The provider was never called: no agent process was started.
    await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(ws.recordPath)).toBe(false);
  });
});
