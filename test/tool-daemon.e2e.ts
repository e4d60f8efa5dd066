/**
 * The exported subagent tool against a real daemon process, driven by a scripted parent model
 * loop (test/support/tool-loop.ts). The daemon loads the fixture providers (`echo` with every
 * capability, `bare` with none; the prompt picks the behaviour) besides the real `spawn` and
 * `fork`. Counters the daemon keeps (`stats`: started, disposed, rollbacks) and the lifecycle
 * events the client receives are what the assertions look at.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ParentInput, RemoteSubagentService, SubagentStartEvent } from '../client/index.js';
import { createSubagentTool, type SubagentToolConfig, type SubagentToolHandle, type ToolDefinition, type ToolService } from '../tool/index.js';
import { startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { callOnce, runParentLoop } from './support/tool-loop.js';

let daemon: DaemonProcess;
let service: RemoteSubagentService;
let scripts: string;
const clients = new ClientPool();
const handles: Array<SubagentToolHandle<ParentInput>> = [];
const parent: ParentInput = { sessionId: 'parent-tool-e2e', cwd: tmpdir() };

beforeAll(async () => {
  daemon = await startDaemon({ detachGraceMs: 0 });
  scripts = mkdtempSync(join(tmpdir(), 'tool-e2e-scripts-'));
});
afterAll(async () => {
  await clients.closeAll();
  await daemon?.stop();
  rmSync(scripts, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.dispose()));
  await clients.closeAll();
});

async function open(config: SubagentToolConfig): Promise<SubagentToolHandle<ParentInput>> {
  service = await clients.connect(daemon.socket);
  const handle = createSubagentTool<ParentInput>(service, config);
  handles.push(handle);
  return handle;
}

function mounted(handle: SubagentToolHandle<ParentInput>): ToolDefinition<ParentInput> {
  const tool = handle.current();
  if (!tool) throw new Error(`tool ${handle.name} is not mounted: ${handle.refusal()?.message}`);
  return tool;
}

/** The daemon's fixture counters, read through the tool itself. */
async function stats(tool: ToolDefinition<ParentInput>): Promise<{ started: number; disposed: number; rollbacks: number }> {
  const { text } = await callOnce(tool, { description: 'read counters', prompt: 'stats' }, { parent });
  return JSON.parse(text) as { started: number; disposed: number; rollbacks: number };
}

/**
 * A call the tool refuses before any child starts: an error result saying why, and the daemon's
 * start counter moved only by the counters' own read.
 */
async function expectRefusedBeforeStart(context: Parameters<typeof callOnce>[2], why: string): Promise<void> {
  const tool = mounted(await open({ provider: 'echo' }));
  const before = await stats(tool);
  const { result, text } = await callOnce(tool, { description: 'refused', prompt: 'echo x' }, context);
  expect(result.isError).toBe(true);
  expect(text).toContain(why);
  expect((await stats(tool)).started).toBe(before.started + 1);
}

/** The daemon's view of a run: its state and stop reason. */
async function stateOf(runId: string): Promise<{ state: string; stopReason?: string }> {
  const { run } = await service.ops.inspect(runId);
  return { state: run.state, ...(run.stopReason !== undefined && { stopReason: run.stopReason }) };
}

function startEvents(): SubagentStartEvent[] {
  const seen: SubagentStartEvent[] = [];
  service.on('subagent/start', (event) => void seen.push(event));
  return seen;
}

/** Polls an async condition until it holds; bounded. */
async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let scriptCount = 0;
function scripted(steps: unknown[]): string {
  scriptCount += 1;
  const path = join(scripts, `script-${scriptCount}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

describe('foreground calls', () => {
  it('a scripted parent delegates, reads the answer, and every run is disposed exactly once', async () => {
    const tool = mounted(await open({ provider: 'echo' }));
    const before = await stats(tool);
    const transcript = await runParentLoop(
      () => [tool],
      [
        [{ name: 'subagent', input: { description: 'say hello', prompt: 'echo hello there' } }],
        [{ name: 'subagent', input: { description: 'fail it', prompt: 'stop error' } }],
      ],
      { parent },
    );
    expect(transcript.map((entry) => [entry.text, entry.result.isError])).toEqual([
      ['echo hello there', false],
      ['subagent run failed\nPartial output before the run ended:\nstopped error', true],
    ]);
    const after = await stats(tool);
    // Two scripted calls plus the first stats probe: three starts, three disposes.
    expect(after.started - before.started).toBe(3);
    expect(after.disposed - before.disposed).toBe(3);
  });

  it.each([
    ['aborted', 'subagent run was cancelled'],
    ['error', 'subagent run failed'],
    ['max-tokens', 'subagent run hit its token limit before finishing'],
    ['refusal', 'subagent declined the task'],
    ['overheated', 'subagent run ended abnormally (overheated)'],
  ])('stop reason %s reads as an error with its headline and the partial output', async (reason, headline) => {
    const tool = mounted(await open({ provider: 'echo' }));
    const { result, text } = await callOnce(tool, { description: 'stop', prompt: `stop ${reason}` }, { parent });
    expect(result.isError).toBe(true);
    expect(text).toBe(`${headline}\nPartial output before the run ended:\nstopped ${reason}`);
  });

  it('a real child that fails gives the headline, then Diagnostic:, then its partial output', async () => {
    const model = scripted([{ text: 'half of the answer', error: { kind: 'http', message: '502 from upstream', status: 502 } }]);
    const tool = mounted(await open({ provider: 'spawn', agentOptions: { model } }));
    const { result, text } = await callOnce(tool, { description: 'flaky upstream', prompt: 'answer' }, { parent });
    expect(result.isError).toBe(true);
    expect(text.split('\n')[0]).toBe('subagent run failed');
    expect(text).toMatch(/\nDiagnostic: .*502 from upstream/);
    expect(text.indexOf('Diagnostic:')).toBeLessThan(text.indexOf('Partial output before the run ended:\nhalf of the answer'));
  });

  it('agentOptions reach the child: a spawn child answers from the configured model', async () => {
    const model = scripted([{ text: 'answer from the configured model' }]);
    const tool = mounted(await open({ provider: 'spawn', agentOptions: { model } }));
    const { result, text } = await callOnce(tool, { description: 'ask', prompt: 'what do you say?' }, { parent });
    expect([text, result.isError]).toEqual(['answer from the configured model', false]);
  });

  it('an already-aborted call never starts a provider', async () => {
    await expectRefusedBeforeStart({ parent, signal: AbortSignal.abort() }, 'tool call aborted before dispatch');
  });

  it('aborting the call cancels the child: the run reads as cancelled and is disposed', async () => {
    const tool = mounted(await open({ provider: 'echo' }));
    const seen = startEvents();
    const controller = new AbortController();
    const call = callOnce(tool, { description: 'wait forever', prompt: 'hang' }, { parent, signal: controller.signal });
    await waitFor(() => seen.length === 1, 10_000, () => 'the child to start');
    controller.abort();
    const { result, text } = await call;
    expect(result.isError).toBe(true);
    expect(text.split('\n')[0]).toBe('subagent run was cancelled');
    expect(await stateOf(seen[0]!.runId)).toEqual({ state: 'disposed', stopReason: 'aborted' });
  });

  it('a call without a calling agent is refused and starts nothing', async () => {
    await expectRefusedBeforeStart({}, 'requires a calling agent');
  });

  it('sibling calls in one step run concurrently, each with its description as the run label', async () => {
    const tool = mounted(await open({ provider: 'echo' }));
    const seen = startEvents();
    const controller = new AbortController();
    const step = runParentLoop(
      () => [tool],
      [
        [
          { name: 'subagent', input: { description: 'first sibling', prompt: 'hang' } },
          { name: 'subagent', input: { description: 'second sibling', prompt: 'hang' } },
        ],
      ],
      { parent, signal: controller.signal },
    );
    // Both children are running at once: neither call waited for the other.
    await waitFor(() => seen.length === 2, 10_000, () => 'two children running');
    controller.abort();
    const transcript = await step;
    expect(transcript.map((entry) => entry.text.split('\n')[0])).toEqual(['subagent run was cancelled', 'subagent run was cancelled']);
  });

  it('a description longer than a label is refused with a clear error', async () => {
    const tool = mounted(await open({ provider: 'echo' }));
    const { result, text } = await callOnce(tool, { description: 'x'.repeat(300), prompt: 'echo x' }, { parent });
    expect(result.isError).toBe(true);
    expect(text).toContain('3-5 words');
  });
});

describe('depth', () => {
  it('the default cap 3 allows a child at depth 3 and refuses one at depth 4', async () => {
    const tool = mounted(await open({ provider: 'echo' }));
    const atTwo = await callOnce(tool, { description: 'depth', prompt: 'depth' }, { parent: { ...parent, subagentDepth: 2 } });
    expect([atTwo.text, atTwo.result.isError]).toEqual(['3', false]);
    const atThree = await callOnce(tool, { description: 'depth', prompt: 'depth' }, { parent: { ...parent, subagentDepth: 3 } });
    expect(atThree.result.isError).toBe(true);
    expect(atThree.text).toContain('DEPTH_EXCEEDED');
  });

  it("'provider-managed' sends no cap", async () => {
    const tool = mounted(await open({ provider: 'echo', maxDepth: 'provider-managed' }));
    const deep = await callOnce(tool, { description: 'depth', prompt: 'depth' }, { parent: { ...parent, subagentDepth: 7 } });
    expect([deep.text, deep.result.isError]).toEqual(['8', false]);
  });

  it('a numeric cap on a provider without depthLimit is refused at mount, naming provider-managed', async () => {
    const handle = await open({ provider: 'bare' });
    expect(handle.current()).toBeUndefined();
    expect(handle.refusal()?.code).toBe('UNSUPPORTED_CAPABILITY');
    expect(handle.refusal()?.message).toContain("maxDepth: 'provider-managed'");
    expect((await open({ provider: 'bare', maxDepth: 'provider-managed' })).current()).toBeDefined();
  });
});

describe('wording from the real providers', () => {
  it('spawn: a separate agent that does not see this conversation; fork: inherits it', async () => {
    const spawnTool = mounted(await open({ provider: 'spawn', enableRunInBackground: false }));
    const forkTool = mounted(await open({ provider: 'fork', toolName: 'fork_subagent', enableRunInBackground: false }));
    const promptOf = (tool: ToolDefinition): string => (tool.inputSchema['properties'] as Record<string, { description: string }>)['prompt']!.description;
    expect(spawnTool.description).toContain('does not see this conversation');
    expect(promptOf(spawnTool)).toContain('include everything it needs');
    expect(forkTool.description).toContain('inherits this conversation');
    expect(forkTool.description).not.toContain('does not see this conversation');
    expect(promptOf(forkTool)).toContain('completed turns');
    for (const tool of [spawnTool, forkTool]) expect(tool.description).toContain('waits for the subagent and returns its result');
  });
});

describe('two instances, two providers', () => {
  it('coexist and route each call to its own provider', async () => {
    const echo = await open({ provider: 'echo' });
    const bare = createSubagentTool<ParentInput>(service, { provider: 'bare', toolName: 'plain_subagent', maxDepth: 'provider-managed' });
    handles.push(bare);
    const seen = startEvents();
    const transcript = await runParentLoop(
      () => [mounted(echo), mounted(bare)],
      [
        [
          { name: 'subagent', input: { description: 'to echo', prompt: 'echo one' } },
          { name: 'plain_subagent', input: { description: 'to bare', prompt: 'echo two' } },
        ],
      ],
      { parent },
    );
    expect(transcript.map((entry) => entry.text)).toEqual(['echo one', 'echo two']);
    expect(seen.map((event) => event.provider).sort()).toEqual(['bare', 'echo']);
  });
});

describe('background one-shot jobs', () => {
  it('returns a job id at once; job_output waits for the output', async () => {
    const handle = await open({ provider: 'echo' });
    const transcript = await runParentLoop(
      () => [mounted(handle), ...handle.jobTools()],
      [
        [{ name: 'subagent', input: { description: 'in the back', prompt: 'echo from the background', run_in_background: true } }],
        [{ name: 'job_output', input: { job_id: 'subagent-1', wait: true } }],
      ],
      { parent },
    );
    expect(transcript[0]!.text).toContain('started background job subagent-1');
    expect([transcript[1]!.text, transcript[1]!.result.isError]).toEqual(['echo from the background', false]);
  });

  it('the job outlives the call signal; job_kill kills a running job, and it was disposed before the outcome', async () => {
    const handle = await open({ provider: 'echo' });
    const tool = mounted(handle);
    const seen = startEvents();
    const controller = new AbortController();
    const [started] = await runParentLoop(
      () => [tool],
      [[{ name: 'subagent', input: { description: 'long job', prompt: 'hang', run_in_background: true } }]],
      { parent, signal: controller.signal },
    );
    controller.abort();
    const jobId = /job (\S+)/.exec(started!.text)![1]!;
    await waitFor(() => seen.length === 1 && handle.jobs.get(jobId)?.state === 'running', 10_000, () => 'the job to start');
    // A round trip through the daemon later, the aborted call signal has not touched the job.
    await stats(tool);
    expect(handle.jobs.get(jobId)?.state).toBe('running');
    const [killed] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_kill', input: { job_id: jobId } }]], { parent });
    expect(killed!.text).toContain(`job ${jobId} (long job) was killed`);
    // job_kill answered after the settlement, and the run was disposed before it.
    expect(await stateOf(seen[0]!.runId)).toEqual({ state: 'disposed', stopReason: 'aborted' });
  });

  it('killing a job whose start is still pending kills the start (the provider rolls back)', async () => {
    const handle = await open({ provider: 'echo' });
    const tool = mounted(handle);
    const before = await stats(tool);
    const [started] = await runParentLoop(
      () => [tool],
      [[{ name: 'subagent', input: { description: 'slow start', prompt: 'slow-start 20000', run_in_background: true } }]],
      { parent },
    );
    const jobId = /job (\S+)/.exec(started!.text)![1]!;
    expect(handle.jobs.get(jobId)?.state).toBe('starting');
    // Kill once the daemon is provably working on the start, so the kill meets a pending start.
    await until(async () => (await service.ops.status()).runs.starting === 1);
    const [killed] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_kill', input: { job_id: jobId } }]], { parent });
    expect(killed!.text).toBe(`job ${jobId} (slow start) was killed: killed before its child started`);
    expect(handle.jobs.get(jobId)?.state).toBe('killed');
    const after = await stats(tool);
    expect(after.rollbacks).toBe(before.rollbacks + 1);
    expect(after.started).toBe(before.started + 1);
  });

  it('a failed job reports its stop reason and partial output', async () => {
    const handle = await open({ provider: 'echo' });
    const transcript = await runParentLoop(
      () => [mounted(handle), ...handle.jobTools()],
      [
        [{ name: 'subagent', input: { description: 'refuses', prompt: 'stop refusal', run_in_background: true } }],
        [{ name: 'job_output', input: { job_id: 'subagent-1', wait: true } }],
      ],
      { parent },
    );
    expect(transcript[1]!.result.isError).toBe(true);
    expect(transcript[1]!.text).toBe('job subagent-1 (refuses) failed: refusal\nPartial output before the run ended:\nstopped refusal');
  });

  it('enableRunInBackground: false removes the parameter and refuses a forced background call', async () => {
    const tool = mounted(await open({ provider: 'echo', enableRunInBackground: false }));
    expect(Object.keys(tool.inputSchema['properties'] as object)).toEqual(['description', 'prompt']);
    const before = await stats(tool);
    const { result, text } = await callOnce(tool, { description: 'forced', prompt: 'echo x', run_in_background: true }, { parent });
    expect(result.isError).toBe(true);
    expect(text).toContain('enableRunInBackground: false');
    expect((await stats(tool)).started).toBe(before.started + 1);
  });
});

describe('a dispose that fails, at the seam of a real service', () => {
  /** The real service, except that every run's dispose reports a failure after really disposing. */
  function failingDispose(real: RemoteSubagentService): ToolService<ParentInput> {
    return {
      list: () => real.list(),
      getProvider: (name) => real.getProvider(name),
      on: ((event: 'subagent/provider-added', listener: never) => real.on(event, listener)) as ToolService<ParentInput>['on'],
      start: async (name, request) => {
        const run = await real.start(name, request);
        return { ...run, result: run.result, dispose: async () => {
          await run.dispose();
          throw new Error('the reaper timed out');
        } };
      },
    };
  }

  it('foreground: a completed run whose dispose fails is an error; background: appended to the job', async () => {
    service = await clients.connect(daemon.socket);
    const handle = createSubagentTool<ParentInput>(failingDispose(service), { provider: 'echo' });
    handles.push(handle);
    const transcript = await runParentLoop(
      () => [mounted(handle), ...handle.jobTools()],
      [
        [
          { name: 'subagent', input: { description: 'fg', prompt: 'echo done' } },
          { name: 'subagent', input: { description: 'bg', prompt: 'stop error', run_in_background: true } },
        ],
        [{ name: 'job_output', input: { job_id: 'subagent-1', wait: true } }],
      ],
      { parent },
    );
    expect(transcript[0]!.result.isError).toBe(true);
    expect(transcript[0]!.text).toBe('subagent run completed but could not be disposed\ndispose failed: the reaper timed out\nOutput:\necho done');
    expect(transcript[2]!.text).toBe('job subagent-1 (bg) failed: error; dispose failed: the reaper timed out\nPartial output before the run ended:\nstopped error');
  });
});

describe('mount lifecycle over the real service', () => {
  it('appears when its provider is registered later, goes when removed, re-derives wording, ignores others', async () => {
    const handle = await open({ provider: 'later', maxDepth: 'provider-managed', enableRunInBackground: false });
    const changes: Array<string | undefined> = [];
    handle.onChange(({ tool }) => changes.push(tool?.description));
    expect(handle.current()).toBeUndefined();
    const local = (inheritsParentContext: boolean) => ({
      name: 'later',
      capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false },
      inheritsParentContext,
      start: () => Promise.reject(new Error('not used')),
    });
    const removeOther = service.registerProvider({ ...local(false), name: 'unrelated' });
    expect(changes).toEqual([]);
    const removeFirst = service.registerProvider(local(false));
    expect(handle.current()?.description).toContain('does not see this conversation');
    removeFirst();
    expect(handle.current()).toBeUndefined();
    service.registerProvider(local(true));
    expect(handle.current()?.description).toContain('inherits this conversation');
    removeOther();
    expect(changes.map((d) => (d === undefined ? 'gone' : d.includes('inherits') ? 'fork wording' : 'spawn wording'))).toEqual([
      'spawn wording',
      'gone',
      'fork wording',
    ]);
  });
});
