/**
 * The seam's rules where subagentd used to differ from the reference (issue 31, part A), each
 * driven through a real daemon process: by the real client, by a raw wire peer, or by the exported
 * tool over the real client where only the tool can show the rule.
 *
 * - an abort in the same tick as the start always rejects it with ABORTED (signal and $/cancelRequest);
 * - a `provider-added` listener that throws fails `registerProvider`, leaving nothing registered;
 * - the tool: dispose unmounts it; a pending job whose rollback fails is `failed`; `job_kill`'s
 *   abort reason; a continuable start follows the call's signal until accepted; `interrupt_agent`
 *   parks the inbox; `list_agents` descendants in pre-order; a first-step `report` is relayed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChildReport, ParentInput, RemoteSubagentService } from '../client/index.js';
import { SubagentError, type SubagentRun } from '../protocol/index.js';
import { createChildControlTools, createSubagentTool, type SubagentToolHandle, type ToolDefinition } from '../tool/index.js';
import { rejection } from './support/assertions.js';
import { startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { RawPeer } from './support/raw-peer.js';
import { callOnce, runParentLoop } from './support/tool-loop.js';

/** Same-tick aborts, each a fresh start: today about 2 in 10 fulfilled. */
const SAME_TICK_ROUNDS = 40;
const KEY = 'seam-letter-owner-key-0123456789';
const prompt = (text: string) => [{ type: 'text' as const, text }];
const frame = (message: unknown): Buffer => {
  const body = Buffer.from(JSON.stringify(message));
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]);
};
const textOf = (blocks: readonly { type: string; text?: string }[]): string => blocks.map((b) => b.text ?? '').join('');

let daemon: DaemonProcess;
let scripts: string;
const clients = new ClientPool();
const handles: Array<SubagentToolHandle<ParentInput>> = [];

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
  scripts = mkdtempSync(join(tmpdir(), 'seam-letter-'));
});
afterAll(async () => {
  await daemon?.stop();
  rmSync(scripts, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.dispose()));
  await clients.closeAll();
});

function scripted(name: string, steps: unknown[]): string {
  const path = join(scripts, `${name}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

/** The fixture provider's counters (test/fixtures/test-providers.ts), through an ordinary run. */
async function fixtureStats(service: RemoteSubagentService): Promise<{ pending: number }> {
  const run = await service.start('echo', { prompt: prompt('stats'), parent: { sessionId: 'stats', cwd: '/tmp' }, signal: new AbortController().signal });
  const result = await run.result;
  await run.dispose();
  return JSON.parse(textOf(result.output)) as { pending: number };
}

async function waitForAsync(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function track(handle: SubagentToolHandle<ParentInput>): SubagentToolHandle<ParentInput> {
  handles.push(handle);
  return handle;
}

describe('A.3: an abort in the same tick as the start rejects it with ABORTED', () => {
  it(`by the start's signal, ${SAME_TICK_ROUNDS} times in a row; no run is handed out that then ends aborted`, async () => {
    const service = await clients.connect(daemon.socket);
    const outcomes: string[] = [];
    for (let i = 0; i < SAME_TICK_ROUNDS; i++) {
      const controller = new AbortController();
      const started = service.start('echo', { prompt: prompt(`echo round ${i}`), parent: { sessionId: 'same-tick', cwd: daemon.dir }, signal: controller.signal });
      controller.abort();
      const outcome = await started.then(
        async (run: SubagentRun) => `fulfilled (${(await run.result).stopReason})`,
        (error: unknown) => (error instanceof SubagentError ? error.code : String(error)),
      );
      outcomes.push(outcome);
    }
    expect(outcomes).toEqual(Array(SAME_TICK_ROUNDS).fill('ABORTED'));
  });

  it(`by $/cancelRequest written in the same tick as the start, ${SAME_TICK_ROUNDS} times in a row`, async () => {
    const peer = await RawPeer.initialized(daemon.socket);
    const parent = { sessionId: 'same-tick-wire', cwd: daemon.dir };
    const codes: Array<string | undefined> = [];
    for (let i = 0; i < SAME_TICK_ROUNDS; i++) {
      const id = 1000 + i;
      // Both frames in one write: the same tick on the sender, whatever the scheduler does between
      // two writes on a loaded machine (the daemon may still read them in separate chunks).
      const start = { jsonrpc: '2.0', id, method: 'subagent/start', params: { provider: 'echo', prompt: prompt(`echo wire ${i}`), parent } };
      peer.writeRaw(Buffer.concat([frame(start), frame({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } })]));
      const reply = await peer.waitFor((m) => m.id === id, 10_000);
      codes.push(reply.error?.data?.code ?? `fulfilled ${JSON.stringify(reply.result)}`);
    }
    expect(codes).toEqual(Array(SAME_TICK_ROUNDS).fill('ABORTED'));
    // A rejected start emits no lifecycle event on the wire.
    expect(peer.notifications('subagent/start')).toEqual([]);
    peer.close();
  });
});

describe('A.5: a provider-added listener that throws', () => {
  it('makes registerProvider throw that error and leaves nothing registered', async () => {
    const service = await clients.connect(daemon.socket);
    const boom = new Error('this harness refuses the provider');
    const removed: string[] = [];
    service.on('subagent/provider-removed', ({ name }) => void removed.push(name));
    const unsubscribe = service.on('subagent/provider-added', () => {
      throw boom;
    });
    const local = {
      name: 'local-fussy',
      capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false },
      inheritsParentContext: false,
      start: () => Promise.reject(new Error('never started')),
    };
    expect(() => service.registerProvider(local)).toThrow(boom);
    expect(service.list()).not.toContain('local-fussy');
    expect(service.getProvider('local-fussy')).toBeUndefined();
    expect(removed).toEqual(['local-fussy']);
    expect((await rejection(service.start('local-fussy', { prompt: prompt('x'), parent: { sessionId: 'p', cwd: daemon.dir }, signal: new AbortController().signal }))).code).toBe(
      'NO_PROVIDER',
    );
    // Nothing half-registered blocks the name: without the throwing listener it registers.
    unsubscribe();
    const dispose = service.registerProvider(local);
    expect(service.list()).toContain('local-fussy');
    dispose();
  });
});

describe('A.6: the tool', () => {
  const parent: ParentInput = { sessionId: 'tool-letter-parent', cwd: '/tmp' };

  it('dispose() unmounts it: current() is undefined and a retained definition refuses', async () => {
    const service = await clients.connect(daemon.socket);
    const handle = track(createSubagentTool<ParentInput>(service, { provider: 'echo' }));
    const kept = handle.current()!;
    expect(kept).toBeDefined();
    const changes: unknown[] = [];
    handle.onChange((change) => void changes.push(change.tool));
    await handle.dispose();
    expect(handle.current()).toBeUndefined();
    const entry = await callOnce(kept, { description: 'after dispose', prompt: 'echo hi' }, { parent });
    expect(entry.result.isError).toBe(true);
    expect(entry.text).toBe('subagent is no longer available: the tool was disposed');
    expect(changes).toEqual([undefined]);
  });

  it('killing a job whose start is pending: failed with the error when the rollback fails, killed when it rolls back', async () => {
    const service = await clients.connect(daemon.socket);
    const handle = track(createSubagentTool<ParentInput>(service, { provider: 'echo' }));
    const [bad, good] = await runParentLoop(
      () => [handle.current()!],
      [[
        { name: 'subagent', input: { description: 'bad rollback', prompt: 'bad-rollback 30000', run_in_background: true } },
        { name: 'subagent', input: { description: 'good rollback', prompt: 'slow-start 30000', run_in_background: true } },
      ]],
      { parent },
    );
    const badId = /started background job (\S+)/.exec(bad!.text)![1]!;
    const goodId = /started background job (\S+)/.exec(good!.text)![1]!;
    // Both starts are in the provider's hands (not still on their way), so the kill hits a rollback.
    await waitForAsync(async () => (await fixtureStats(service)).pending >= 2, 10_000, 'both starts to reach the provider');
    const [killedBad, killedGood] = await runParentLoop(
      () => handle.jobTools(),
      [[
        { name: 'job_kill', input: { job_id: badId } },
        { name: 'job_kill', input: { job_id: goodId } },
      ]],
      { parent },
    );
    expect(handle.jobs.get(badId)).toMatchObject({ state: 'failed' });
    expect(killedBad!.result.isError).toBe(true);
    expect(killedBad!.text).toContain('fixture rollback failed: the half-started child could not be torn down');
    expect(handle.jobs.get(goodId)).toMatchObject({ state: 'killed', detail: 'killed before its child started' });
    expect(killedGood!.result.isError).toBe(false);
  });

  it('job_kill aborts the child with the reason "background subagent task killed"', async () => {
    const service = await clients.connect(daemon.socket);
    const signals: AbortSignal[] = [];
    // The real client, seen through the tool's service shape: what signal did the tool give it?
    const watched = new Proxy(service, {
      get(target, key, receiver) {
        if (key === 'start') {
          return (name: string, request: { signal: AbortSignal }) => {
            signals.push(request.signal);
            return target.start(name, request as Parameters<RemoteSubagentService['start']>[1]);
          };
        }
        const value: unknown = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const handle = track(createSubagentTool<ParentInput>(watched, { provider: 'echo' }));
    const [started] = await runParentLoop(() => [handle.current()!], [[{ name: 'subagent', input: { description: 'hanging', prompt: 'hang', run_in_background: true } }]], { parent });
    const jobId = /started background job (\S+)/.exec(started!.text)![1]!;
    await waitFor(() => handle.jobs.get(jobId)?.state === 'running', 10_000, () => 'the job to run');
    const [killed] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_kill', input: { job_id: jobId } }]], { parent });
    expect(killed!.text).toMatch(new RegExp(`^job ${jobId} \\(hanging\\) was killed`));
    expect(signals).toHaveLength(1);
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[0]!.reason).toBeInstanceOf(Error);
    expect((signals[0]!.reason as Error).message).toBe('background subagent task killed');
  });

  it("a continuable start follows the call's signal until the child is accepted: an aborted call creates no child", async () => {
    const service = await clients.connect(daemon.socket, { ownerKey: KEY });
    const handle = track(createSubagentTool<ParentInput>(service, { provider: 'echo', backgroundMode: 'continuable' }));
    const me: ParentInput = { sessionId: 'continuable-abort-parent', cwd: daemon.dir };
    const call = new AbortController();
    const pending = callOnce(handle.current()!, { description: 'slow to start', prompt: 'slow-start 30000' }, { parent: me, signal: call.signal });
    await new Promise((resolve) => setTimeout(resolve, 200));
    call.abort();
    const entry = await pending;
    expect(entry.result.isError).toBe(true);
    expect(entry.text).toMatch(/^subagent run was cancelled before its child started \(ABORTED\)/);
    expect((await service.children!.list(me, 'descendants')).entries).toEqual([]);
  });

  it('interrupt_agent stops the turn, parks the queued messages until the next send_message, and the parent hears "was stopped before it finished"', async () => {
    const service = await clients.connect(daemon.socket, { ownerKey: KEY });
    const model = scripted('parked', [{ text: 'still thinking', delayMs: 30_000 }, { text: 'answer to the queued one' }, { text: 'answer to the last one' }]);
    const handle = track(createSubagentTool<ParentInput>(service, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { model } }));
    const inbox: string[] = [];
    handle.onChildSettled((_notice, message) => void inbox.push(textOf(message)));
    const control = createChildControlTools<ParentInput>(service.children!);
    const tools = (): ToolDefinition<ParentInput>[] => [handle.current()!, ...control.all];
    const me: ParentInput = { sessionId: 'interrupt-parks-parent', cwd: daemon.dir };

    const [started] = await runParentLoop(tools, [[{ name: 'subagent', input: { description: 'parked', prompt: 'think' } }]], { parent: me });
    const childId = /started subagent (\S+)/.exec(started!.text)![1]!;
    const [queued, stopped] = await runParentLoop(
      tools,
      [[{ name: 'send_message', input: { subagent_id: childId, message: 'queued while running' } }], [{ name: 'interrupt_agent', input: { agent_id: childId } }]],
      { parent: me },
    );
    expect(queued!.result.isError).toBe(false);
    expect(stopped!.result.isError).toBe(false);
    await waitFor(() => inbox.length === 1, 15_000, () => 'the stopped notice');
    expect(inbox[0]).toMatch(/^parked was stopped before it finished\. /);
    // Parked: the queued message has not run, the child is idle.
    const [listed] = await runParentLoop(tools, [[{ name: 'list_agents', input: {} }]], { parent: me });
    expect(listed!.text).toBe(`${childId} idle "parked"`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(inbox).toHaveLength(1);

    // The next send_message runs the parked one first, then itself: one notice, the last answer.
    await runParentLoop(tools, [[{ name: 'send_message', input: { subagent_id: childId, message: 'the last one' } }]], { parent: me });
    await waitFor(() => inbox.length === 2, 15_000, () => 'the notice after the parked turns');
    expect(inbox[1]).toBe('parked finished. Its closing message:\nanswer to the last one');
  });

  it('list_agents with scope descendants lists in pre-order, each child followed by its own subtree', async () => {
    const service = await clients.connect(daemon.socket, { ownerKey: KEY });
    const children = service.children!;
    const root: ParentInput = { sessionId: 'preorder-root', cwd: daemon.dir };
    const start = async (under: ParentInput, label: string): Promise<string> =>
      (await children.start('echo', { prompt: prompt(`echo ${label}`), parent: under, label, signal: new AbortController().signal })).childId;
    const a = await start(root, 'a');
    const b = await start(root, 'b');
    const a1 = await start({ sessionId: a, cwd: daemon.dir }, 'a1');
    const a1x = await start({ sessionId: a1, cwd: daemon.dir }, 'a1x');
    const [listing] = await runParentLoop(() => createChildControlTools<ParentInput>(children).all, [[{ name: 'list_agents', input: { scope: 'descendants' } }]], { parent: root });
    const lines = listing!.text.split('\n').map((line) => line.replace(/ (running|idle)/, ''));
    expect(lines).toEqual([
      `${a} "a" parent=preorder-root has-children`,
      `  ${a1} "a1" parent=${a} has-children`,
      `    ${a1x} "a1x" parent=${a1}`,
      `${b} "b" parent=preorder-root`,
    ]);
  });

  it("a report made in the child's first step, before its start returned, reaches the parent", async () => {
    const service = await clients.connect(daemon.socket, { ownerKey: KEY });
    const reports: ChildReport[] = [];
    service.children!.onReport!((report) => void reports.push(report));
    const handle = track(createSubagentTool<ParentInput>(service, { provider: 'echo', backgroundMode: 'continuable' }));
    const me: ParentInput = { sessionId: 'early-report-parent', cwd: daemon.dir };
    const entry = await callOnce(handle.current()!, { description: 'eager', prompt: 'report-first found it already' }, { parent: me });
    const childId = /started subagent (\S+)/.exec(entry.text)![1]!;
    await waitFor(() => reports.length === 1, 10_000, () => 'the early report');
    expect(reports[0]).toMatchObject({ childId, parentId: 'early-report-parent', label: 'eager', output: 'found it already', mode: 'quiet' });
  });
});
