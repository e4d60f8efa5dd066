/**
 * `subagentd mcp`: the pool as MCP tools, so any MCP host can delegate. Each provider becomes
 * one tool (the first `subagent`, the others `subagent_<name>`), plus `job_output` / `job_kill`
 * for background runs. Rules: bad arguments are an MCP `InvalidParams` error naming the field;
 * a run that did not complete is an `isError` result (headline, diagnostic, partial output); a
 * call's abort cancels its run; a call with a `progressToken` gets `notifications/progress`
 * while the child works. Imports client/ and protocol/ only.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { SubagentError, type ProviderInfo, type RemoteSubagentService } from '../../client/index.js';
import { BackgroundJobs } from './background-jobs.js';
import { DEFAULT_HEARTBEAT_MS, ProgressForwarder } from './progress.js';
import { describeSubagentTool, readFailure, readResult } from './subagent-tool-stand-in.js';

export interface McpFaceOptions {
  readonly service: RemoteSubagentService;
  /** Daemon providers to offer, in order; the first becomes `subagent`. */
  readonly providers: readonly string[];
  /** The children's model (`agentOptions.model`). */
  readonly model?: string;
  /** The working directory the children work in (the host's project). */
  readonly cwd: string;
  readonly version: string;
  readonly heartbeatMs?: number;
}

/** Tool name → provider; the first provider is the plain `subagent`. */
export function toolNames(providers: readonly string[]): Map<string, string> {
  return new Map(providers.map((provider, i) => [i === 0 ? 'subagent' : `subagent_${provider}`, provider]));
}

const invalid = (tool: string, field: string, rule: string): McpError =>
  new McpError(ErrorCode.InvalidParams, `${tool}: "${field}" ${rule}`, { field });

interface DelegateArgs {
  readonly description: string;
  readonly prompt: string;
  readonly background: boolean;
}

function parseDelegateArgs(tool: string, args: Record<string, unknown>): DelegateArgs {
  for (const key of Object.keys(args)) {
    if (!['description', 'prompt', 'run_in_background'].includes(key)) throw invalid(tool, key, 'is not a parameter of this tool');
  }
  const { description, prompt, run_in_background: background } = args;
  if (typeof description !== 'string' || !description.trim()) throw invalid(tool, 'description', 'must be a non-empty string');
  if (typeof prompt !== 'string' || !prompt.trim()) throw invalid(tool, 'prompt', 'must be a non-empty string');
  if (background !== undefined && typeof background !== 'boolean') throw invalid(tool, 'run_in_background', 'must be a boolean');
  return { description, prompt, background: background === true };
}

function jobId(tool: string, args: Record<string, unknown>): string {
  if (typeof args['job_id'] !== 'string' || !args['job_id']) throw invalid(tool, 'job_id', 'must be a job id such as "subagent-1"');
  return args['job_id'];
}

const result = (text: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text }], ...(isError && { isError }) });

const JOB_TOOLS: Tool[] = [
  {
    name: 'job_output',
    description: 'Read the status and output of a background subagent job; with wait, after it finishes.',
    inputSchema: {
      type: 'object',
      properties: { job_id: { type: 'string', description: 'The id run_in_background returned.' }, wait: { type: 'boolean' } },
      required: ['job_id'],
    },
  },
  {
    name: 'job_kill',
    description: 'Stop a background subagent job.',
    inputSchema: { type: 'object', properties: { job_id: { type: 'string' } }, required: ['job_id'] },
  },
];

export function createMcpFace(options: McpFaceOptions): { readonly server: Server; close(): Promise<void> } {
  const { service } = options;
  const routes = toolNames(options.providers);
  const describe = (provider: string): ProviderInfo => {
    const info = service.getProvider(provider);
    if (!info) throw new SubagentError('NO_PROVIDER', `no provider named '${provider}' (available: ${service.list().join(', ')})`);
    return info;
  };
  for (const provider of routes.values()) describe(provider);
  const jobs = new BackgroundJobs();
  const server = new Server({ name: 'subagentd', version: options.version }, { capabilities: { tools: {} } });
  const parent = { sessionId: `mcp-${process.pid}`, cwd: options.cwd };
  const agentOptions = options.model !== undefined ? { agentOptions: { model: options.model } } : {};

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      ...[...routes].map(([name, provider]): Tool => {
        const text = describeSubagentTool(describe(provider), true);
        return { name, description: text.description, inputSchema: text.inputSchema as Tool['inputSchema'] };
      }),
      ...JOB_TOOLS,
    ],
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    const args = request.params.arguments ?? {};
    if (name === 'job_output') {
      const read = await jobs.read(jobId(name, args), args['wait'] === true);
      if (!read) throw invalid(name, 'job_id', 'names no job of this server');
      return result(`status: ${read.status}${read.text ? `\n${read.text}` : ''}`, read.status === 'failed');
    }
    if (name === 'job_kill') {
      if (!jobs.kill(jobId(name, args))) throw invalid(name, 'job_id', 'names no job of this server');
      return result('kill requested');
    }
    const provider = routes.get(name);
    if (provider === undefined) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}"`, { field: 'name' });
    const call = parseDelegateArgs(name, args);
    const startRequest = (signal: AbortSignal, onEvent?: ProgressForwarder['onEvent']) =>
      service.start(provider, {
        label: call.description,
        prompt: [{ type: 'text', text: call.prompt }],
        parent,
        signal,
        ...agentOptions,
        ...(onEvent && { onEvent }),
      });
    if (call.background) return result(`started background job ${jobs.add((signal) => startRequest(signal))}`);

    const token = extra._meta?.progressToken;
    const progress =
      token === undefined
        ? undefined
        : new ProgressForwarder(
            (value, message) =>
              extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: value, message } }),
            options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
          );
    try {
      let run;
      try {
        run = await startRequest(extra.signal, progress?.onEvent);
      } catch (error) {
        return result(readFailure(error), true);
      }
      progress?.report(`started ${call.description}`);
      let read: { text: string; isError: boolean };
      try {
        read = readResult(await run.result);
      } catch (error) {
        read = { text: readFailure(error), isError: true };
      }
      try {
        await run.dispose();
      } catch (error) {
        read = { text: `${read.text}\ndispose failed: ${error instanceof Error ? error.message : String(error)}`, isError: true };
      }
      return result(read.text, read.isError);
    } finally {
      progress?.stop();
    }
  });

  return {
    server,
    async close() {
      await jobs.close();
      await server.close();
    },
  };
}
