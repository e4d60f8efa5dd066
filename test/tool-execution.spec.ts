/**
 * The tool's execution and mount rules that a real daemon cannot be made to break on demand: a
 * rejected result, a failing dispose, the order of dispose and a job's outcome, a start that
 * never finishes. Driven through the exported tool over an in-memory service (test/support).
 */
import { describe, expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import { createSubagentTool, headline, type SubagentToolConfig } from '../tool/index.js';
import { waitFor } from './support/scripted-fixtures.js';
import { FakeService, provider, text } from './support/tool-fakes.js';
import { callOnce, runParentLoop } from './support/tool-loop.js';

const input = { description: 'do a thing', prompt: 'please do the thing' };

function setup(config: Partial<SubagentToolConfig> = {}) {
  const service = new FakeService();
  service.add(provider('p'));
  const handle = createSubagentTool(service, { provider: 'p', ...config });
  return { service, handle, tool: handle.current()! };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

describe('foreground settlement', () => {
  it('a rejected result is an error result, and the run is still disposed exactly once', async () => {
    const { service, tool } = setup();
    const call = callOnce(tool, input, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.reject(new Error('backend vanished'));
    const { result, text: out } = await call;
    expect(result.isError).toBe(true);
    expect(out).toBe('subagent run failed: its result was lost (backend vanished)');
    expect(service.runs[0]!.disposeCalls).toBe(1);
  });

  it('a result rejection and a dispose rejection are both kept in the text', async () => {
    const { service, tool } = setup();
    service.disposeBehaviour = () => Promise.reject(new Error('could not reap'));
    const call = callOnce(tool, input, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.reject(new Error('backend vanished'));
    const { text: out } = await call;
    expect(out).toBe('subagent run failed: its result was lost (backend vanished)\ndispose failed: could not reap');
    expect(service.runs[0]!.disposeCalls).toBe(1);
  });

  it('a dispose failure after a completed result is an error too, with the output kept', async () => {
    const { service, tool } = setup();
    service.disposeBehaviour = () => Promise.reject(new Error('could not reap'));
    const call = callOnce(tool, input, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({ output: text('all done'), stopReason: 'completed' });
    const { result, text: out } = await call;
    expect(result.isError).toBe(true);
    expect(out).toBe('subagent run completed but could not be disposed\ndispose failed: could not reap\nOutput:\nall done');
  });

  it('completed output is the concatenation of the text blocks only', async () => {
    const { service, tool } = setup();
    const call = callOnce(tool, input, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({
      output: [{ type: 'text', text: 'one ' }, { type: 'image', data: 'AAAA', mimeType: 'image/png' }, { type: 'text', text: 'two' }],
      stopReason: 'completed',
    });
    expect((await call).text).toBe('one two');
  });

  it('headline, then Diagnostic:, then Partial output; no diagnostic line when there is none', async () => {
    const { service, tool } = setup();
    const calls = [callOnce(tool, input, { parent: 'a' }), callOnce(tool, input, { parent: 'b' })];
    await waitFor(() => service.runs.length === 2);
    service.runs[0]!.resolve({ output: text('so far'), stopReason: 'max-tokens', diagnostic: 'ceiling of 8k tokens' });
    service.runs[1]!.resolve({ output: [], stopReason: 'refusal' });
    const [first, second] = await Promise.all(calls);
    expect(first!.text).toBe('subagent run hit its token limit before finishing\nDiagnostic: ceiling of 8k tokens\nPartial output before the run ended:\nso far');
    expect(second!.text).toBe('subagent declined the task');
  });

  it('every stop reason has its headline; an unknown one names itself', () => {
    expect(['aborted', 'error', 'max-tokens', 'refusal', 'lost-power'].map(headline)).toEqual([
      'subagent run was cancelled',
      'subagent run failed',
      'subagent run hit its token limit before finishing',
      'subagent declined the task',
      'subagent run ended abnormally (lost-power)',
    ]);
  });

  it('a start failure is an error result naming the code', async () => {
    const { service, tool } = setup();
    service.remove('p');
    const { result, text: out } = await callOnce(tool, input, { parent: 'agent' });
    expect(result.isError).toBe(true);
    expect(out).toContain('(NO_PROVIDER)');
  });

  it('an aborted call, or one without a calling agent, never reaches the service', async () => {
    const { service, tool } = setup();
    const aborted = await callOnce(tool, input, { parent: 'agent', signal: AbortSignal.abort() });
    const orphan = await callOnce(tool, input, {});
    expect(aborted.text).toBe('subagent: tool call aborted before dispatch');
    expect(orphan.text).toContain('requires a calling agent');
    expect(service.order).toEqual([]);
  });

  it('bad model input gets a clear error and starts nothing', async () => {
    const { service, tool } = setup();
    const transcript = await runParentLoop(
      () => [tool],
      [[
        { name: 'subagent', input: { prompt: 'no description' } },
        { name: 'subagent', input: { description: 'x', prompt: '' } },
        { name: 'subagent', input: { description: 'x', prompt: 'y', run_in_background: 'yes' } },
        { name: 'subagent', input: 'not an object' },
      ]],
      { parent: 'agent' },
    );
    expect(transcript.every((entry) => entry.result.isError)).toBe(true);
    expect(transcript.map((entry) => entry.text)).toEqual([
      'subagent needs description, a short non-empty string',
      'subagent needs prompt, a non-empty string',
      'subagent: run_in_background must be a boolean',
      'subagent needs an object input',
    ]);
    expect(service.order).toEqual([]);
  });

  it('sibling calls run concurrently: both children start before either settles', async () => {
    const { service, tool } = setup();
    const step = runParentLoop(() => [tool], [[{ name: 'subagent', input }, { name: 'subagent', input }]], { parent: 'agent' });
    await waitFor(() => service.runs.length === 2);
    for (const run of service.runs) run.resolve({ output: text(run.id), stopReason: 'completed' });
    expect((await step).map((entry) => entry.text)).toEqual(['run-1', 'run-2']);
  });
});

describe('background one-shot jobs', () => {
  it('dispose runs before the outcome is reported', async () => {
    const { service, handle, tool } = setup();
    const disposing = deferred();
    service.disposeBehaviour = () => disposing.promise;
    handle.jobs.onSettled((job) => service.order.push(`settled ${job.id} ${job.state}`));
    const [started] = await runParentLoop(() => [tool], [[{ name: 'subagent', input: { ...input, run_in_background: true } }]], { parent: 'agent' });
    expect(started!.text).toContain('started background job subagent-1');
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({ output: text('background answer'), stopReason: 'completed' });
    await waitFor(() => service.order.includes('dispose run-1'));
    // Disposing has begun but not finished: the job is not reported yet.
    const [pending] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_output', input: { job_id: 'subagent-1' } }]], { parent: 'agent' });
    expect(pending!.text).toBe('job subagent-1 (do a thing) is still running');
    disposing.resolve();
    const [done] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_output', input: { job_id: 'subagent-1', wait: true } }]], { parent: 'agent' });
    expect(done!.text).toBe('background answer');
    expect(service.order).toEqual(['start p', 'dispose run-1', 'settled subagent-1 completed']);
  });

  it('a failed job gives the reason, then the diagnostic, then the dispose failure', async () => {
    const { service, handle, tool } = setup();
    service.disposeBehaviour = () => Promise.reject(new Error('still running'));
    await callOnce(tool, { ...input, run_in_background: true }, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({ output: [], stopReason: 'error', diagnostic: 'model said 500' });
    const job = await handle.jobs.wait('subagent-1');
    expect(job).toMatchObject({ state: 'failed', detail: 'error; diagnostic: model said 500; dispose failed: still running' });
  });

  it('a completed job whose dispose fails is failed, with the output kept', async () => {
    const { service, handle, tool } = setup();
    service.disposeBehaviour = () => Promise.reject(new Error('still running'));
    await callOnce(tool, { ...input, run_in_background: true }, { parent: 'agent' });
    await waitFor(() => service.runs.length === 1);
    service.runs[0]!.resolve({ output: text('answer'), stopReason: 'completed' });
    expect(await handle.jobs.wait('subagent-1')).toMatchObject({ state: 'failed', output: 'answer', detail: 'completed; dispose failed: still running' });
  });

  it('the job does not belong to the call signal; killing a pending start cancels it', async () => {
    const { service, handle, tool } = setup();
    const signals: AbortSignal[] = [];
    service.startBehaviour = (request) =>
      new Promise((_, reject) => {
        signals.push(request.signal);
        request.signal.addEventListener('abort', () => reject(new SubagentError('ABORTED', 'start cancelled')), { once: true });
      });
    const call = new AbortController();
    await callOnce(tool, { ...input, run_in_background: true }, { parent: 'agent', signal: call.signal });
    call.abort();
    await waitFor(() => signals.length === 1);
    expect(signals[0]!.aborted).toBe(false);
    const [killed] = await runParentLoop(() => handle.jobTools(), [[{ name: 'job_kill', input: { job_id: 'subagent-1' } }]], { parent: 'agent' });
    expect(killed!.text).toBe('job subagent-1 (do a thing) was killed: killed before its child started');
    expect(signals[0]!.aborted).toBe(true);
    expect(service.runs).toEqual([]);
  });

  it('job ids count up; unknown and settled jobs are answered plainly', async () => {
    const { service, handle, tool } = setup();
    await callOnce(tool, { ...input, run_in_background: true }, { parent: 'agent' });
    await callOnce(tool, { ...input, run_in_background: true }, { parent: 'agent' });
    await waitFor(() => service.runs.length === 2);
    expect(handle.jobs.list().map((job) => job.id)).toEqual(['subagent-1', 'subagent-2']);
    service.runs[0]!.resolve({ output: text('x'), stopReason: 'completed' });
    await handle.jobs.wait('subagent-1');
    const transcript = await runParentLoop(
      () => handle.jobTools(),
      [[
        { name: 'job_kill', input: { job_id: 'subagent-1' } },
        { name: 'job_output', input: { job_id: 'subagent-9' } },
      ]],
      { parent: 'agent' },
    );
    expect(transcript.map((entry) => [entry.text, entry.result.isError])).toEqual([
      ['job subagent-1 had already ended (completed); nothing to kill', false],
      ["no background job 'subagent-9'", true],
    ]);
    await handle.dispose();
    expect(handle.jobs.get('subagent-2')?.state).toBe('killed');
  });
});

describe('mount lifecycle and wording', () => {
  it('mounts when its provider arrives, unmounts when it goes, re-derives wording, ignores other providers', () => {
    const service = new FakeService();
    const handle = createSubagentTool(service, { provider: 'p', enableRunInBackground: false });
    const changes: string[] = [];
    handle.onChange(({ tool }) => changes.push(tool === undefined ? 'gone' : tool.description.includes('inherits') ? 'fork' : 'fresh'));
    expect(handle.current()).toBeUndefined();
    service.add(provider('other'));
    service.add(provider('p'));
    service.remove('other');
    service.remove('p');
    service.add(provider('p', { inheritsParentContext: true }));
    expect(changes).toEqual(['fresh', 'gone', 'fork']);
  });

  it('after dispose it stops following the service', async () => {
    const service = new FakeService();
    const handle = createSubagentTool(service, { provider: 'p' });
    await handle.dispose();
    service.add(provider('p'));
    expect(handle.current()).toBeUndefined();
  });

  it('pinned fragments: fresh vs inherited context, and the suffix per background setting', () => {
    const wording = (inherits: boolean, config: Partial<SubagentToolConfig>) => {
      const service = new FakeService();
      service.add(provider('p', { inheritsParentContext: inherits }));
      const tool = createSubagentTool(service, { provider: 'p', ...config }).current()!;
      const prompt = (tool.inputSchema['properties'] as Record<string, { description: string }>)['prompt']!.description;
      return { description: tool.description, prompt, params: Object.keys(tool.inputSchema['properties'] as object) };
    };
    const fresh = wording(false, {});
    expect(fresh.description).toContain('does not see this conversation');
    expect(fresh.prompt).toContain('include everything it needs');
    expect(fresh.description).toContain('job_output');
    expect(fresh.description).toContain('job_kill');
    expect(fresh.params).toEqual(['description', 'prompt', 'run_in_background']);
    const fork = wording(true, { enableRunInBackground: false });
    expect(fork.description).toContain('inherits this conversation');
    expect(fork.description).not.toContain('does not see this conversation');
    expect(fork.prompt).toContain('completed turns');
    expect(fork.description).toContain('waits for the subagent and returns its result');
    expect(fork.params).toEqual(['description', 'prompt']);
  });
});
