/**
 * Background one-shot jobs: a subagent call with `run_in_background: true` returns a job id
 * (`<toolName>-1`, …) at once and the child no longer belongs to the call's signal. A job settles
 * as completed (its output), killed (stop reason `aborted`) or failed (the reason, then
 * `; diagnostic: …`); the run is disposed BEFORE the outcome is reported, and a dispose failure is
 * appended (`…; dispose failed: …`). Killing a job aborts its signal with the reason
 * "background subagent task killed"; a job whose start is still pending is then `killed` when the
 * start rolls back as ABORTED, and `failed` with the error when the rollback fails.
 * `job_output` and `job_kill` are the model's view of the table.
 */
import type { SubagentRun } from '../protocol/index.js';
import { settleAndDispose } from './run-outcome.js';
import { messageOf, textOf, textResult, type ToolDefinition, type ToolResult } from './tool-definition.js';

export type JobState = 'starting' | 'running' | 'completed' | 'failed' | 'killed';

export interface JobSnapshot {
  readonly id: string;
  readonly label: string;
  readonly state: JobState;
  /** The child's output text (completed; partial for failed or killed). */
  readonly output: string;
  /** For failed and killed jobs: why. */
  readonly detail?: string;
}

interface Job {
  readonly id: string;
  readonly label: string;
  state: JobState;
  output: string;
  detail?: string;
  readonly controller: AbortController;
  readonly settled: Promise<void>;
}

/** The abort reason a killed job's child gets. */
export const KILL_REASON = 'background subagent task killed';

/** A start that rejected because it was cancelled (the seam's ABORTED, or a DOM-style AbortError). */
function isAbortError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  return (error as { code?: unknown }).code === 'ABORTED' || (error as { name?: unknown }).name === 'AbortError';
}

export const JOB_OUTPUT_TOOL = 'job_output';
export const JOB_KILL_TOOL = 'job_kill';

export class BackgroundJobs {
  private readonly jobs = new Map<string, Job>();
  private readonly listeners = new Set<(job: JobSnapshot) => void>();
  private counter = 0;

  /** Start `begin` detached from any call; returns the job id at once. */
  launch(prefix: string, label: string, begin: (signal: AbortSignal) => Promise<SubagentRun<unknown>>): string {
    this.counter += 1;
    const id = `${prefix}-${this.counter}`;
    const controller = new AbortController();
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const job: Job = { id, label, state: 'starting', output: '', controller, settled };
    this.jobs.set(id, job);
    void this.follow(job, begin).finally(() => {
      settle();
      for (const listener of this.listeners) {
        try {
          listener(snapshot(job));
        } catch {
          // A listener's failure is its own; the job has settled regardless.
        }
      }
    });
    return id;
  }

  private async follow(job: Job, begin: (signal: AbortSignal) => Promise<SubagentRun<unknown>>): Promise<void> {
    let run: SubagentRun<unknown>;
    try {
      run = await begin(job.controller.signal);
    } catch (error) {
      // Killed only when the start was rolled back as cancelled; a rollback that failed is reported.
      if (job.controller.signal.aborted && isAbortError(error)) finish(job, 'killed', '', 'killed before its child started');
      else finish(job, 'failed', '', `the subagent could not start: ${messageOf(error)}`);
      return;
    }
    job.state = 'running';
    const { result, resultError, disposeError } = await settleAndDispose(run);
    const disposed = disposeError === undefined ? '' : `; dispose failed: ${messageOf(disposeError)}`;
    if (result === undefined) {
      finish(job, 'failed', '', `its result was lost: ${messageOf(resultError)}${disposed}`);
    } else if (result.stopReason === 'completed') {
      if (disposeError === undefined) finish(job, 'completed', textOf(result.output));
      else finish(job, 'failed', textOf(result.output), `completed${disposed}`);
    } else if (result.stopReason === 'aborted') {
      finish(job, 'killed', textOf(result.output), `was cancelled${disposed}`);
    } else {
      const diagnostic = result.diagnostic === undefined ? '' : `; diagnostic: ${result.diagnostic}`;
      finish(job, 'failed', textOf(result.output), `${result.stopReason}${diagnostic}${disposed}`);
    }
  }

  get(id: string): JobSnapshot | undefined {
    const job = this.jobs.get(id);
    return job && snapshot(job);
  }

  list(): JobSnapshot[] {
    return [...this.jobs.values()].map(snapshot);
  }

  /** Resolves once the job has settled (disposed, outcome recorded); undefined for an unknown id. */
  async wait(id: string, signal?: AbortSignal): Promise<JobSnapshot | undefined> {
    const job = this.jobs.get(id);
    if (!job) return undefined;
    await raceAbort(job.settled, signal);
    return snapshot(job);
  }

  /** Cancel a job (a pending start too) and wait for it to settle. */
  async kill(id: string): Promise<JobSnapshot | undefined> {
    const job = this.jobs.get(id);
    if (!job) return undefined;
    job.controller.abort(new Error(KILL_REASON));
    await job.settled;
    return snapshot(job);
  }

  /** Kill every unsettled job (for a harness shutting down). */
  async killAll(): Promise<void> {
    await Promise.all([...this.jobs.keys()].map((id) => this.kill(id)));
  }

  /** Called once per job, after it settled. */
  onSettled(listener: (job: JobSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The model's `job_output` and `job_kill` tools over this table. */
  tools(names: { output?: string; kill?: string } = {}): ToolDefinition[] {
    return [this.outputTool(names.output ?? JOB_OUTPUT_TOOL), this.killTool(names.kill ?? JOB_KILL_TOOL)];
  }

  private outputTool(name: string): ToolDefinition {
    return {
      name,
      description:
        'Read the outcome of a background subagent job: its result once it has finished, else that it is still running. With wait: true the call waits until the job settles.',
      inputSchema: {
        type: 'object',
        properties: {
          job_id: { type: 'string', description: 'The job id the subagent call returned.' },
          wait: { type: 'boolean', description: 'Default false: wait for the job to settle.' },
        },
        required: ['job_id'],
        additionalProperties: false,
      },
      execute: async (input, context) => {
        const args = jobArgs(name, input);
        if (typeof args === 'object' && 'isError' in args) return args;
        const { jobId, wait } = args;
        const found = wait ? await this.wait(jobId, context.signal).catch(() => this.get(jobId)) : this.get(jobId);
        return found ? describeJob(found) : unknownJob(jobId);
      },
    };
  }

  private killTool(name: string): ToolDefinition {
    return {
      name,
      description: 'Stop a background subagent job (also one still starting) and report how it ended.',
      inputSchema: {
        type: 'object',
        properties: { job_id: { type: 'string', description: 'The job id the subagent call returned.' } },
        required: ['job_id'],
        additionalProperties: false,
      },
      execute: async (input) => {
        const args = jobArgs(name, input);
        if ('isError' in args) return args;
        const before = this.get(args.jobId);
        if (!before) return unknownJob(args.jobId);
        if (isSettled(before.state)) return textResult(`job ${before.id} had already ended (${before.state}); nothing to kill`);
        const after = await this.kill(args.jobId);
        return after ? describeJob(after) : unknownJob(args.jobId);
      },
    };
  }
}

function finish(job: Job, state: JobState, output: string, detail?: string): void {
  job.state = state;
  job.output = output;
  if (detail !== undefined) job.detail = detail;
}

function snapshot(job: Job): JobSnapshot {
  return { id: job.id, label: job.label, state: job.state, output: job.output, ...(job.detail !== undefined && { detail: job.detail }) };
}

function isSettled(state: JobState): boolean {
  return state === 'completed' || state === 'failed' || state === 'killed';
}

export function describeJob(job: JobSnapshot): ToolResult {
  const partial = job.output === '' ? '' : `\nPartial output before the run ended:\n${job.output}`;
  switch (job.state) {
    case 'starting':
    case 'running':
      return textResult(`job ${job.id} (${job.label}) is still running`);
    case 'completed':
      return textResult(job.output);
    case 'killed':
      return textResult(`job ${job.id} (${job.label}) was killed: ${job.detail ?? 'cancelled'}${partial}`);
    case 'failed':
      return textResult(`job ${job.id} (${job.label}) failed: ${job.detail ?? 'unknown reason'}${partial}`, true);
  }
}

function unknownJob(id: string): ToolResult {
  return textResult(`no background job '${id}'`, true);
}

function jobArgs(tool: string, input: unknown): { jobId: string; wait: boolean } | ToolResult {
  const args = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  if (typeof args['job_id'] !== 'string' || args['job_id'] === '') return textResult(`${tool} needs job_id, a job id string`, true);
  if (args['wait'] !== undefined && typeof args['wait'] !== 'boolean') return textResult(`${tool}: wait must be a boolean`, true);
  return { jobId: args['job_id'], wait: args['wait'] === true };
}

function raceAbort(settled: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return settled;
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    void settled.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
