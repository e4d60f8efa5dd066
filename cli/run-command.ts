/**
 * `subagentd run PROMPT`: the main job. Connects to the shared daemon (starting it if none runs),
 * delegates one task, shows progress on stderr while the child works, prints the result on
 * stdout, and exits 0 only when the run completed. Ctrl-C cancels the child.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { SubagentError, type ObjectJsonSchema, type RunEvent, type StartProgress, type SubagentResult } from '../protocol/index.js';
import { describeStartProgress, describeWait, isWaitEvent } from '../common/progress-text.js';
import type { CommonSettings } from './options.js';
import { packageRoot } from '../common/package-info.js';
import type { RemoteSubagentService } from '../client/index.js';
import { openClient } from './daemon-client.js';
import { StatusLine } from './status-line.js';
import { worktreeNote } from '../tool/run-outcome.js';

export interface RunCommandOptions {
  readonly prompt: string;
  readonly provider: string;
  readonly model: string | undefined;
  readonly schemaFile: string | undefined;
  readonly quiet: boolean;
  /** `--worktree`: the child works in its own git worktree and branch; `--base REF` is where it starts. */
  readonly worktree?: boolean;
  readonly baseRef?: string | undefined;
}

/**
 * A file named on the command line: relative to our cwd, or else to this package's folder, so the
 * README's `examples/...` work from anywhere once the package is installed.
 */
export function inputFile(file: string, cwd = process.cwd()): string {
  if (isAbsolute(file)) return file;
  const here = resolve(cwd, file);
  if (existsSync(here)) return here;
  const shipped = resolve(packageRoot(), file);
  return existsSync(shipped) ? shipped : here;
}

/** `scripted:FILE` is read by the daemon, whose cwd is not ours: make the path absolute here. */
export function absoluteModel(model: string | undefined, cwd = process.cwd()): string | undefined {
  if (!model?.startsWith('scripted:')) return model;
  return `scripted:${inputFile(model.slice('scripted:'.length), cwd)}`;
}

function readSchema(file: string): ObjectJsonSchema {
  try {
    return JSON.parse(readFileSync(inputFile(file), 'utf8')) as ObjectJsonSchema;
  } catch (error) {
    throw new SubagentError('INVALID_REQUEST', `cannot read --schema ${file}: ${(error as Error).message}`, { field: '/outputSchema' });
  }
}

/**
 * Progress without a terminal (piped, logged): one line per thing the child does — what it says
 * before its tool calls, the calls, their results, model retries. A step's text is held until
 * the step ends: a step that calls tools prints it, and the last step's text is the answer, which
 * goes to stdout once at the end and never also here.
 */
function progressPrinter(): (event: RunEvent) => void {
  let said = '';
  const line = (text: string): void => void process.stderr.write(`${text}\n`);
  return (event) => {
    if (event.kind === 'text-delta') said += event.text;
    else if (event.kind === 'session') {
      const e = event.event;
      if (e.type === 'assistant/message') {
        const calls = e.toolCalls ?? [];
        if (calls.length > 0 && said.trim() !== '') line(said.trim());
        said = '';
        for (const call of calls) line(`  → ${call.name} ${call.arguments}`);
      } else if (e.type === 'tool/result') line(`  ← ${e.name}${e.isError ? ' failed' : ''}`);
      else if (e.type === 'turn/end') line(`  · turn ended: ${e.reason}`);
    } else if (isWaitEvent(event)) line(`  ${event.kind === 'retry' ? '!' : '…'} ${describeWait(event)}`);
  };
}

/**
 * The daemon's environment selects the model, not this shell's: when this shell sets a model
 * variable the daemon does not have, say so (once, on stderr) instead of silently using the other.
 */
async function warnOnEnvDrift(client: RemoteSubagentService, model: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (model?.startsWith('scripted:')) return;
  const mine = { endpoint: env['OPENAI_BASE_URL']?.trim(), model: model ?? env['SUBAGENTD_MODEL']?.trim(), deepseek: env['DEEPSEEK_API_KEY']?.trim() };
  if (!mine.endpoint && !mine.model && !mine.deepseek) return;
  const daemon = (await client.ops.status()).config;
  if (!daemon) return;
  const drift: string[] = [];
  if (mine.endpoint && mine.endpoint.replace(/\/+$/, '') !== daemon.model.endpoint?.replace(/\/+$/, '')) {
    drift.push(`OPENAI_BASE_URL here is ${mine.endpoint}, the daemon's endpoint is ${daemon.model.endpoint ?? 'unset'}`);
  }
  if (mine.model && !model && mine.model !== daemon.model.default) drift.push(`SUBAGENTD_MODEL here is ${mine.model}, the daemon's is ${daemon.model.default ?? 'unset'}`);
  if (mine.deepseek && !daemon.model.endpoint) drift.push('DEEPSEEK_API_KEY is set here but the daemon has no model endpoint');
  if (drift.length === 0) return;
  process.stderr.write(
    `subagentd: the daemon's environment selects the model, not this shell's: ${drift.join('; ')}. ` +
      `Put the variables in ${daemon.envFile} and run \`subagentd reload\` (or \`subagentd restart\` from this shell).\n`,
  );
}

/**
 * Progress on a terminal: one status line (what the child is doing, its tool calls and tokens)
 * instead of the streamed text, so the answer appears once, on stdout, at the end. A model retry
 * shows until the model answers again.
 */
function liveStatus(line: StatusLine, shownLive: () => boolean): (event: RunEvent) => void {
  let tools = 0;
  let last = '';
  let tokens = { prompt: 0, completion: 0 };
  let phase = 'thinking';
  const show = (): void =>
    line.set(`${phase}${tools > 0 ? ` · ${tools} tool call${tools === 1 ? '' : 's'}${last ? ` (last: ${last})` : ''}` : ''} · tokens ${tokens.prompt} in / ${tokens.completion} out`);
  return (event) => {
    if (event.kind === 'text-delta') phase = 'writing the answer';
    else if (event.kind === 'reasoning-delta') phase = 'reasoning';
    else if (event.kind === 'queued' || event.kind === 'agent-starting') {
      // The start's stages, sent right after its answer: when `$/progress` already showed them live
      // (startStatus), the line must not go back to "queued" for a run that is working.
      if (shownLive()) return;
      phase = describeWait(event);
    } else if (isWaitEvent(event)) phase = describeWait(event);
    else {
      const e = event.event;
      if (e.type === 'assistant/message') {
        for (const call of e.toolCalls ?? []) {
          tools += 1;
          last = call.name;
          phase = `→ ${call.name}`;
        }
      } else if (e.type === 'tool/result') phase = 'thinking';
      else if (e.type === 'usage') tokens = { prompt: tokens.prompt + e.usage.promptTokens, completion: tokens.completion + e.usage.completionTokens };
      else return;
    }
    show();
  };
}

/** Before the answer to the start: queued (with the place in line), starting, the ACP agent's stages. */
function startStatus(line: StatusLine, provider: string, seen: { live: boolean }): (progress: StartProgress) => void {
  return (progress) => {
    seen.live = true;
    line.set(describeStartProgress(progress, provider));
  };
}

export async function runCommand(settings: CommonSettings, options: RunCommandOptions): Promise<number> {
  const tty = !settings.json && !options.quiet && process.stderr.isTTY === true;
  const line = tty ? new StatusLine(process.stderr) : undefined;
  line?.set('connecting to the daemon (starting it if none runs)');
  try {
    return await delegate(settings, options, line);
  } finally {
    line?.clear();
  }
}

async function delegate(settings: CommonSettings, options: RunCommandOptions, line: StatusLine | undefined): Promise<number> {
  const client = await openClient(settings, { autoStart: true });
  await warnOnEnvDrift(client, options.model);
  line?.set(`asking the daemon for a child (${options.provider})`);
  const abort = new AbortController();
  let interrupts = 0;
  const onInterrupt = (): void => {
    interrupts += 1;
    if (interrupts > 1) process.exit(130);
    line?.clear();
    process.stderr.write('\ncancelling the child (Ctrl-C again to quit at once)\n');
    abort.abort();
  };
  process.on('SIGINT', onInterrupt);
  const model = absoluteModel(options.model);
  const startSeen = { live: false };
  try {
    const run = await client.start(options.provider, {
      prompt: [{ type: 'text', text: options.prompt }],
      parent: { sessionId: `cli-${process.pid}-${Date.now()}`, cwd: process.cwd() },
      signal: abort.signal,
      ...(model !== undefined && { agentOptions: { model } }),
      ...(options.schemaFile !== undefined && { outputSchema: readSchema(options.schemaFile) }),
      ...(options.worktree === true && { isolation: 'worktree' as const, label: options.prompt.slice(0, 40) }),
      ...(options.baseRef !== undefined && { baseRef: options.baseRef }),
      ...(!settings.json && !options.quiet && { onEvent: line ? liveStatus(line, () => startSeen.live) : progressPrinter() }),
      ...(line && { onStartProgress: startStatus(line, options.provider, startSeen) }),
    });
    line?.set('running');
    let result: SubagentResult;
    try {
      result = await run.result;
    } finally {
      // A daemon that went away (say, right after a drain let this child finish) disposed its runs itself.
      await run.dispose().catch((error: unknown) => {
        if (!(error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE')) throw error;
      });
    }
    const text = result.output.map((b) => (b.type === 'text' ? b.text : '')).join('');
    if (settings.json) {
      process.stdout.write(
        `${JSON.stringify({
          runId: run.id,
          provider: options.provider,
          stopReason: result.stopReason,
          output: text,
          structured: result.structured ?? null,
          usage: result.usage ?? null,
          ...(result.diagnostic !== undefined && { diagnostic: result.diagnostic }),
          ...(result.worktree !== undefined && { worktree: result.worktree }),
        })}\n`,
      );
    } else {
      line?.clear();
      if (result.structured !== undefined) process.stdout.write(`${JSON.stringify(result.structured, null, 2)}\n`);
      else process.stdout.write(`${text}\n`);
      if (result.worktree !== undefined) process.stderr.write(`subagentd:${worktreeNote(result).replace(/^\s+\[worktree\]/, '')}\n`);
      if (result.stopReason !== 'completed') {
        process.stderr.write(`subagentd: the child ended with "${result.stopReason}"${result.diagnostic ? `: ${result.diagnostic}` : ''}\n`);
      }
    }
    return result.stopReason === 'completed' ? 0 : 1;
  } finally {
    process.off('SIGINT', onInterrupt);
    await client.close();
  }
}
