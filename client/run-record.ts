/**
 * The client's state for one daemon run: its result promise (settled by `subagent/end`, by
 * `run/wait`, or by losing the daemon), the tools it declared, and the tool calls in flight.
 */
import type { CancellationToken } from 'vscode-jsonrpc/node';
import {
  ToolCallRequest,
  type EndParams,
  type ProviderDescriptor,
  type RunEvent,
  type SubagentResult,
  type ToolCallResult,
} from '../protocol/index.js';
import type { ClientLogger, ClientTool } from './types.js';

/** A run ended with a fault the seam cannot express as a stop reason (reported by the daemon). */
export class RunFaultError extends Error {
  override readonly name = 'RunFaultError';
  constructor(
    readonly runId: string,
    message: string,
  ) {
    super(message);
  }
}

export type RunRecordInit = Pick<RunRecord, 'runId' | 'runToken' | 'provider' | 'runtime' | 'tools' | 'onEvent'> & {
  readonly logger: ClientLogger;
};

export class RunRecord {
  readonly runId: string;
  /** The secret `run/attach` takes; kept so a reconnecting service can re-attach the run. */
  readonly runToken: string;
  readonly provider: string;
  /** The provider's runtime capabilities when the run started; a resume keeps them. */
  readonly runtime: ProviderDescriptor['runtime'];
  readonly tools: ReadonlyMap<string, ClientTool>;
  readonly onEvent: ((event: RunEvent) => void) | undefined;
  readonly result: Promise<SubagentResult>;
  private resolveResult!: (result: SubagentResult) => void;
  private rejectResult!: (error: unknown) => void;
  private isSettled = false;
  private readonly toolCalls = new Set<AbortController>();
  private readonly settleHooks: Array<() => void> = [];
  private readonly logger: ClientLogger;
  /** Stops listening to the start request's signal; set by the service, run on settle or dispose. */
  detachSignal: () => void = () => undefined;
  /** Cancelled while the service was reconnecting: `run/cancel` is sent once it is re-attached. */
  cancelOnReattach = false;
  /** `run/dispose` succeeded: the daemon holds nothing of it any more. */
  disposed = false;

  constructor(init: RunRecordInit) {
    this.runId = init.runId;
    this.runToken = init.runToken;
    this.provider = init.provider;
    this.runtime = init.runtime;
    this.tools = init.tools;
    this.onEvent = init.onEvent;
    this.logger = init.logger;
    this.result = new Promise<SubagentResult>((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
    // Holders may never read `result` (e.g. dispose right away); a rejection must not crash them.
    this.result.catch(() => undefined);
  }

  get settled(): boolean {
    return this.isSettled;
  }

  /** Run once the result settles, however it settles. */
  onSettled(hook: () => void): void {
    if (this.isSettled) hook();
    else this.settleHooks.push(hook);
  }

  /** Settle from the daemon's `subagent/end`. */
  ended(params: EndParams): void {
    if (params.result) this.resolve(params.result);
    else this.fail(new RunFaultError(this.runId, params.error?.message ?? `run ${this.runId} ended without a result`));
  }

  resolve(result: SubagentResult): void {
    if (this.finish()) this.resolveResult(result);
  }

  fail(error: unknown): void {
    if (this.finish()) this.rejectResult(error);
  }

  deliver(event: RunEvent): void {
    if (!this.onEvent) return;
    try {
      this.onEvent(event);
    } catch (error) {
      this.logger.error(`the onEvent handler of run ${this.runId} threw`, error);
    }
  }

  /** Run a declared tool for the daemon. A throw becomes an `isError` result the child can read. */
  async callTool(tool: ClientTool, args: unknown, token: CancellationToken): Promise<ToolCallResult> {
    const controller = new AbortController();
    if (this.isSettled) controller.abort();
    const link = token.onCancellationRequested(() => controller.abort());
    this.toolCalls.add(controller);
    try {
      const output = await tool.execute(args, { signal: controller.signal });
      const failure = ToolCallRequest.checkResult(output);
      return failure ? errorResult(`tool '${tool.name}' returned an invalid result: ${failure.message}`) : output;
    } catch (error) {
      return errorResult(error instanceof Error ? error.message : String(error));
    } finally {
      link.dispose();
      this.toolCalls.delete(controller);
    }
  }

  private finish(): boolean {
    if (this.isSettled) return false;
    this.isSettled = true;
    this.detachSignal();
    // The child is done: tools still running for it are told so.
    for (const controller of this.toolCalls) controller.abort();
    for (const hook of this.settleHooks.splice(0)) hook();
    return true;
  }
}

function errorResult(text: string): ToolCallResult {
  return { content: [{ type: 'text', text }], isError: true };
}
