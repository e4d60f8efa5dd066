/**
 * Section "faces": what a delegation costs through `subagentd mcp` and `subagentd acp` over the
 * same delegation made directly with the client, against one daemon and a one-step scripted
 * child (so the figures are the faces' own overhead, not a model's). Each face is the built CLI
 * process, driven by its protocol's SDK client over stdio, as a host or an editor would.
 *   direct  : client.start → result → dispose
 *   MCP     : tools/call `subagent` (the tool starts, waits, disposes)
 *   ACP new : session/new + first session/prompt (starts the child)   vs direct start → result
 *   ACP next: a later session/prompt (resumes the child)               vs direct resume → result
 */
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import * as acp from '@agentclientprotocol/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { RemoteSubagentRun } from '../client/index.js';
import { abortSignal, client, daemonProcess, REPO } from './daemons.js';
import type { Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, summarize, type Summary } from './stats.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

const MAIN = join(REPO, 'dist', 'cli', 'main.js');

export interface FacesOptions {
  readonly calls: number;
  readonly warmup: number;
}

/** Interleaved rounds, so a shift in the machine's load falls on every path alike. */
const ROUNDS = 4;

async function timedInterleaved(count: number, warmup: number, calls: ReadonlyArray<() => Promise<void>>): Promise<Summary[]> {
  for (const call of calls) for (let i = 0; i < warmup; i++) await call();
  const samples = calls.map((): number[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, call] of calls.entries()) {
      for (let i = 0; i < Math.ceil(count / ROUNDS); i++) {
        const started = performance.now();
        await call();
        samples[k]!.push(performance.now() - started);
      }
    }
  }
  return samples.map(summarize);
}

export async function facesBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: FacesOptions): Promise<void> {
  report.section(
    'Faces: per-call overhead of `subagentd mcp` and `subagentd acp`',
    'One daemon; every child is a one-step scripted `spawn` child. Each face is the built CLI process driven over stdio by its SDK client (MCP `Client`, ACP client side). Overhead = face p50 − direct p50.',
  );
  const daemon = await daemonProcess(cleanup);
  const stateDir = join(daemon.dir, 'state');
  const script = join(world.scriptsDir, 'faces-one-step.json');
  writeFileSync(script, JSON.stringify({ steps: Array.from({ length: options.calls + options.warmup + 1 }, () => ({ text: 'ok', finish: 'stop' })) }));
  const model = `scripted:${script}`;
  const faceArgs = ['--socket', daemon.socket, '--state-dir', stateDir, '--model', model];
  const service = await client(cleanup, daemon.socket, 'bench-faces');
  const parent = { sessionId: 'bench-faces', cwd: world.workspace };
  const prompt = [{ type: 'text' as const, text: 'hi' }];

  const direct = async (): Promise<void> => {
    const run = await service.start('spawn', { prompt, parent, signal: abortSignal(), agentOptions: { model } });
    await run.result;
    await run.dispose();
  };
  const directNoDispose = async (): Promise<void> => {
    const run = await service.start('spawn', { prompt, parent, signal: abortSignal(), agentOptions: { model } });
    await run.result;
  };
  let chain = (await service.start('spawn', { prompt, parent, signal: abortSignal(), agentOptions: { model } })) as RemoteSubagentRun;
  await chain.result;
  const directResume = async (): Promise<void> => {
    chain = await chain.resume!(prompt);
    await chain.result;
  };

  // MCP: the SDK's client over stdio to the face process.
  const transport = new StdioClientTransport({ command: process.execPath, args: [MAIN, 'mcp', ...faceArgs], cwd: world.workspace, env: process.env as Record<string, string>, stderr: 'ignore' });
  const mcp = new Client({ name: 'bench', version: '0' });
  await mcp.connect(transport);
  cleanup.defer('close the MCP face', () => mcp.close());
  const mcpCall = async (): Promise<void> => {
    const result = await mcp.callTool({ name: 'subagent', arguments: { description: 'bench', prompt: 'hi' } });
    if (result.isError) throw new Error(`MCP call failed: ${JSON.stringify(result.content)}`);
  };

  // ACP: the SDK's client side over stdio to the face process.
  const face = spawn(process.execPath, [MAIN, 'acp', ...faceArgs], { cwd: world.workspace, stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = new Promise<void>((resolve) => face.once('exit', () => resolve()));
  cleanup.defer(`stop the ACP face pid ${face.pid}`, async () => {
    face.stdin.end();
    const killer = setTimeout(() => face.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
  });
  const connection = acp
    .client({ name: 'bench' })
    .onNotification(acp.methods.client.session.update, () => undefined)
    .connect(acp.ndJsonStream(Writable.toWeb(face.stdin) as WritableStream<Uint8Array>, Readable.toWeb(face.stdout) as ReadableStream<Uint8Array>));
  const editor = connection.agent;
  await editor.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const ask = async (sessionId: string): Promise<void> => {
    const answer: acp.PromptResponse = await editor.request(acp.methods.agent.session.prompt, { sessionId, prompt });
    if (answer.stopReason !== 'end_turn') throw new Error(`ACP prompt ended ${answer.stopReason}`);
  };
  const acpNew = async (): Promise<void> => {
    const { sessionId } = await editor.request(acp.methods.agent.session.new, { cwd: world.workspace, mcpServers: [] });
    await ask(sessionId);
  };
  const { sessionId } = await editor.request(acp.methods.agent.session.new, { cwd: world.workspace, mcpServers: [] });
  await ask(sessionId);
  const acpNext = (): Promise<void> => ask(sessionId);

  const [directS, directNoDisposeS, directResumeS, mcpS, acpNewS, acpNextS] = await timedInterleaved(options.calls, options.warmup, [
    direct,
    directNoDispose,
    directResume,
    mcpCall,
    acpNew,
    acpNext,
  ]) as [Summary, Summary, Summary, Summary, Summary, Summary];

  const table = new Table(`Per call, ${options.calls} calls each (${ROUNDS} interleaved rounds) after ${options.warmup} unmeasured`, ['path', 'p50', 'p90', 'p99', 'baseline', 'overhead (p50)']);
  const row = (label: string, s: Summary, base?: Summary, baseLabel = ''): void => {
    table.row(label, ms(s.p50), ms(s.p90), ms(s.p99), baseLabel || '–', base ? ms(s.p50 - base.p50) : '–');
  };
  row('direct: start → result → dispose', directS);
  row('direct: start → result', directNoDisposeS);
  row('direct: resume → result', directResumeS);
  row('MCP tools/call subagent', mcpS, directS, 'start → result → dispose');
  row('ACP session/new + first prompt', acpNewS, directNoDisposeS, 'start → result');
  row('ACP next prompt (resume)', acpNextS, directResumeS, 'resume → result');
  table.note('Overheads are differences of medians on a shared 2-core machine: read them as a few milliseconds, not exact figures.');
  report.table(table);
}
