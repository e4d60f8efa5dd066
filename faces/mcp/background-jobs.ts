/**
 * Background delegations of one MCP face: `run_in_background` returns a job id (`subagent-1`,
 * …) at once, and the child no longer belongs to the call's abort. `job_output` reads a job
 * (optionally waiting for it), `job_kill` cancels it. A job's run is disposed before its outcome
 * is reported, and a dispose failure is appended to it. Jobs live as long as the face.
 */
import type { SubagentRun } from '../../client/index.js';
import { readFailure, readResult } from './subagent-tool-stand-in.js';

export type JobStatus = 'running' | 'completed' | 'failed' | 'killed';

interface Job {
  status: JobStatus;
  text: string;
  readonly abort: AbortController;
  readonly settled: Promise<void>;
}

export class BackgroundJobs {
  private readonly jobs = new Map<string, Job>();
  private next = 1;

  /** Registers a job whose run `start` opens; returns its id at once. */
  add(start: (signal: AbortSignal) => Promise<SubagentRun>): string {
    const id = `subagent-${this.next++}`;
    const abort = new AbortController();
    const job: Job = { status: 'running', text: '', abort, settled: Promise.resolve() };
    (job as { settled: Promise<void> }).settled = this.follow(job, start(abort.signal));
    this.jobs.set(id, job);
    return id;
  }

  private async follow(job: Job, starting: Promise<SubagentRun>): Promise<void> {
    let run: SubagentRun;
    try {
      run = await starting;
    } catch (error) {
      job.status = job.abort.signal.aborted ? 'killed' : 'failed';
      job.text = readFailure(error);
      return;
    }
    let status: JobStatus;
    let text: string;
    try {
      const result = await run.result;
      const read = readResult(result);
      status = result.stopReason === 'completed' ? 'completed' : result.stopReason === 'aborted' ? 'killed' : 'failed';
      text = read.text;
    } catch (error) {
      status = 'failed';
      text = readFailure(error);
    }
    try {
      await run.dispose();
    } catch (error) {
      status = 'failed';
      text = `${text}; dispose failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    job.status = status;
    job.text = text;
  }

  /** The job's state; with `wait`, after it settles. Undefined for an unknown id. */
  async read(id: string, wait: boolean): Promise<{ status: JobStatus; text: string } | undefined> {
    const job = this.jobs.get(id);
    if (!job) return undefined;
    if (wait) await job.settled;
    return { status: job.status, text: job.text };
  }

  /** Cancels a running job (also one whose start is still pending); false for an unknown id. */
  kill(id: string): boolean {
    const job = this.jobs.get(id);
    if (!job) return false;
    job.abort.abort();
    return true;
  }

  /** Kills every job and waits for them to settle (the face is closing). */
  async close(): Promise<void> {
    for (const job of this.jobs.values()) job.abort.abort();
    await Promise.all([...this.jobs.values()].map((job) => job.settled));
  }
}
