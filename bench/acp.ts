/**
 * Section 3, ACP: how long an external ACP agent takes from spawn to ready (initialize +
 * session/new answered), for the SDK-built fixture agent and the hand-written raw one, and the
 * cost of one more prompt on the same session (resume) against the in-process `spawn` provider.
 */
import { join } from 'node:path';
import type { RemoteSubagentService } from '../client/index.js';
import { createModelResolver } from '../daemon/agent/model/model-resolver.js';
import type { DaemonProvider, DaemonRun } from '../daemon/provider.js';
import { createAcpProvider, type AcpProviderConfig } from '../daemon/providers/acp/index.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import type { ContentBlock, SubagentResult, SubagentRun } from '../protocol/index.js';
import { abortSignal, client, daemonProcess, REPO } from './daemons.js';
import { benchHost, silentLog } from './owner.js';
import type { Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, p50p99, ratio, summarize, type Summary } from './stats.js';
import { Table } from './table.js';
import type { BenchWorld } from './workspace.js';

export const SDK_AGENT = join(REPO, 'test', 'fixtures', 'acp-sdk-agent.mjs');
export const RAW_AGENT = join(REPO, 'test', 'fixtures', 'acp-raw-agent.mjs');

const HELLO: ContentBlock[] = [{ type: 'text', text: 'hello' }];
const AGAIN: ContentBlock[] = [{ type: 'text', text: 'and again' }];

export interface AcpOptions {
  /** Measured cold starts per agent and path (after one unmeasured start). */
  readonly starts: number;
  /** Measured prompts on one session (after a few unmeasured ones). */
  readonly prompts: number;
  readonly warmupPrompts: number;
}

const agents: Array<{ key: string; label: string; config: AcpProviderConfig }> = [
  {
    key: 'acp-sdk',
    label: 'ACP, SDK fixture agent (mode echo)',
    config: { name: 'acp-sdk', command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'echo' }, disposeGraceMs: { stdin: 2000, term: 1000 } },
  },
  {
    key: 'acp-raw',
    label: 'ACP, raw ndjson fixture agent',
    config: { name: 'acp-raw', command: process.execPath, args: [RAW_AGENT], disposeGraceMs: { stdin: 2000, term: 1000 } },
  },
];

/** What both paths offer: start a run, resume it, dispose it. */
interface Starter {
  start(): Promise<SubagentRun | DaemonRun>;
}

function expectDone(result: SubagentResult, where: string): void {
  if (result.stopReason !== 'completed') throw new Error(`${where}: ended ${result.stopReason}: ${result.diagnostic ?? ''}`);
}

async function coldStarts(starter: Starter, count: number, where: string): Promise<{ ready: Summary; firstResult: Summary; dispose: Summary }> {
  const ready: number[] = [];
  const firstResult: number[] = [];
  const dispose: number[] = [];
  for (let i = 0; i <= count; i++) {
    const t0 = performance.now();
    const run = await starter.start();
    const t1 = performance.now();
    expectDone(await run.result, where);
    const t2 = performance.now();
    await run.dispose();
    const t3 = performance.now();
    if (i === 0) continue; // the first start warms the file cache and the JIT
    ready.push(t1 - t0);
    firstResult.push(t2 - t0);
    dispose.push(t3 - t2);
  }
  return { ready: summarize(ready), firstResult: summarize(firstResult), dispose: summarize(dispose) };
}

/** One session, then `prompts` more prompts on it: each resume → its result. */
async function promptsOnOneSession(starter: Starter, options: AcpOptions, where: string): Promise<Summary> {
  let run = await starter.start();
  expectDone(await run.result, where);
  const samples: number[] = [];
  const handles: Array<SubagentRun | DaemonRun> = [run];
  try {
    for (let i = 0; i < options.warmupPrompts + options.prompts; i++) {
      const t0 = performance.now();
      const next = await run.resume!(AGAIN);
      const result = await next.result;
      const t1 = performance.now();
      expectDone(result, `${where}, prompt ${i + 2}`);
      handles.push(next);
      run = next;
      if (i >= options.warmupPrompts) samples.push(t1 - t0);
    }
  } finally {
    // Every run of a chain is disposed; the agent process ends with the last one.
    for (const handle of handles.reverse()) await handle.dispose();
  }
  return summarize(samples);
}

function providerStarter(provider: DaemonProvider, cwd: string): Starter {
  return { start: () => provider.start({ prompt: HELLO, parent: { sessionId: 'bench-parent', cwd }, childDepth: 1, signal: abortSignal(), host: benchHost() }) };
}

function clientStarter(service: RemoteSubagentService, name: string, cwd: string): Starter {
  return { start: () => service.start(name, { prompt: HELLO, parent: { sessionId: 'bench-parent', cwd }, signal: abortSignal() }) };
}

export async function acpBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: AcpOptions): Promise<void> {
  report.section(
    '3. ACP children',
    'spawn→ready: `start` until it resolves = agent process spawned, `initialize` and `session/new` answered (the first prompt ' +
      'is then sent). Per prompt: `resume` on the same session until its result (one `session/prompt` turn). The SDK agent ' +
      'answers with two message chunks; the raw agent streams two chunks, a tool call and asks permission (answered by the ' +
      "daemon's default `deny` policy, no client round trip). The in-process `spawn` child replays one scripted text step " +
      'per prompt (its session log is flushed and fsynced at each turn end).',
  );
  const cwd = world.workspace;
  const spawnProvider = createSpawnProvider({
    sessionsDir: join(cleanup.tempDir(), 'sessions'),
    resolveModel: createModelResolver({ default: `scripted:${world.chat}` }, {}),
    policy: { write: false, shell: false },
    log: silentLog,
  });
  cleanup.defer('dispose the spawn provider', () => spawnProvider.dispose());
  const daemon = await daemonProcess(cleanup, {
    model: { default: `scripted:${world.chat}` },
    providers: agents.map((a) => ({ type: 'acp', ...a.config })),
  });
  const service = await client(cleanup, daemon.socket, 'acp-bench');

  const table = new Table('ACP start and per-prompt latency', [
    'child',
    'path',
    'spawn→ready p50 / p99',
    'first prompt done p50',
    'dispose p50',
    'per prompt (resume) p50 / p99',
    'per prompt ÷ spawn provider',
  ]);
  const spawnIn = await promptsOnOneSession(providerStarter(spawnProvider, cwd), options, 'spawn in-process');
  const spawnSock = await promptsOnOneSession(clientStarter(service, 'spawn', cwd), options, 'spawn over the socket');
  const spawnStartIn = await coldStarts(providerStarter(spawnProvider, cwd), options.starts, 'spawn in-process');
  const spawnStartSock = await coldStarts(clientStarter(service, 'spawn', cwd), options.starts, 'spawn over the socket');
  for (const agent of agents) {
    const provider = createAcpProvider(agent.config, { log: silentLog });
    const inProcess = providerStarter(provider, cwd);
    const overSocket = clientStarter(service, agent.key, cwd);
    const startsIn = await coldStarts(inProcess, options.starts, `${agent.key} in-process`);
    const promptIn = await promptsOnOneSession(inProcess, options, `${agent.key} in-process`);
    const startsSock = await coldStarts(overSocket, options.starts, `${agent.key} over the socket`);
    const promptSock = await promptsOnOneSession(overSocket, options, `${agent.key} over the socket`);
    table.row(agent.label, 'provider in this process', p50p99(startsIn.ready), ms(startsIn.firstResult.p50), ms(startsIn.dispose.p50), p50p99(promptIn), ratio(promptIn.p50 / spawnIn.p50));
    table.row('', 'client → socket → daemon process', p50p99(startsSock.ready), ms(startsSock.firstResult.p50), ms(startsSock.dispose.p50), p50p99(promptSock), ratio(promptSock.p50 / spawnSock.p50));
  }
  table.row('spawn, scripted model (reference)', 'provider in this process', p50p99(spawnStartIn.ready), ms(spawnStartIn.firstResult.p50), ms(spawnStartIn.dispose.p50), p50p99(spawnIn), '1.00×');
  table.row('', 'client → socket → daemon process', p50p99(spawnStartSock.ready), ms(spawnStartSock.firstResult.p50), ms(spawnStartSock.dispose.p50), p50p99(spawnSock), '1.00×');
  table.note(`${options.starts} measured cold starts per row (after one unmeasured), ${options.prompts} measured prompts on one session (after ${options.warmupPrompts}).`);
  table.note('Ratios compare with the spawn provider on the same path. dispose = until the agent process has exited and been reaped (stdin closed first).');
  report.table(table);
}
