/**
 * Section: the warm ACP pool. Start→ready (`start` until it resolves: the agent's session exists)
 * for a provider with `warm: 1` against the same agent with no pool, in alternating pairs so a
 * change in the machine's load hits both sides alike. Before each warm sample the pool is waited
 * on (untimed) until its replacement is ready, as it would be between a user's delegations.
 * Agents: the repo's SDK fixture agent and, when it is in the real-agent cache, Qwen Code 0.24.4
 * (its model is a local chat-completions server; start→ready never calls it).
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DaemonProvider } from '../daemon/provider.js';
import { createAcpProvider, type AcpProviderConfig } from '../daemon/providers/acp/index.js';
import type { ContentBlock } from '../protocol/index.js';
import { SDK_AGENT } from './acp.js';
import { abortSignal } from './daemons.js';
import { formatLoad } from './machine.js';
import { benchHost, silentLog } from './owner.js';
import { sleep, withTimeout, type Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, ratio, summarize, type Summary } from './stats.js';
import { Table } from './table.js';
import { startChatCompletionsServer, textResponse } from '../test/support/chat-completions-server.js';
import { writeQwenSettings } from '../test/support/real-agents.js';
import type { BenchWorld } from './workspace.js';

const HELLO: ContentBlock[] = [{ type: 'text', text: 'hello' }];
/** Where test/support/real-agents.ts caches Qwen Code; the bench uses it only if it is there. */
const QWEN_ENTRY = join(process.env['TMPDIR'] ?? tmpdir(), 'subagentd-real-agents', '@qwen-code+qwen-code@0.24.4', 'node_modules', '@qwen-code', 'qwen-code', 'cli-entry.js');

export interface AcpWarmOptions {
  /** Alternating cold/warm pairs per agent (after one unmeasured pair). */
  readonly pairs: number;
  /** Pairs for Qwen Code, whose cold start takes seconds; 0 leaves it out (--quick). */
  readonly qwenPairs: number;
}

interface Agent {
  readonly label: string;
  readonly config: Omit<AcpProviderConfig, 'name'>;
  readonly pairs: number;
}

/** start→ready of one start, then the run is finished and disposed (untimed). */
async function startToReady(provider: DaemonProvider, cwd: string): Promise<number> {
  const t0 = performance.now();
  const run = await provider.start({ prompt: HELLO, parent: { sessionId: 'bench-parent', cwd }, childDepth: 1, signal: abortSignal(), host: benchHost() });
  const ready = performance.now() - t0;
  const result = await run.result;
  await run.dispose();
  if (result.stopReason !== 'completed') throw new Error(`ended ${result.stopReason}: ${result.diagnostic ?? ''}`);
  return ready;
}

async function poolReady(provider: DaemonProvider, timeoutMs: number): Promise<void> {
  await withTimeout(
    (async () => {
      for (;;) {
        const status = provider.processes!();
        if (status.ready >= 1) return;
        if (status.lastError) throw new Error(`warm-up failed: ${status.lastError}`);
        await sleep(5);
      }
    })(),
    timeoutMs,
    'the warm pool',
  );
}

async function pairs(agent: Agent, cleanup: Cleanup, cwd: string): Promise<{ cold: Summary; warm: Summary; warmStarts: number }> {
  const cold = createAcpProvider({ name: 'cold', ...agent.config }, { log: silentLog });
  const warm = createAcpProvider({ name: 'warm', ...agent.config, warm: 1 }, { log: silentLog });
  cleanup.defer(`close the warm ${agent.label} pool`, () => warm.close?.());
  const coldMs: number[] = [];
  const warmMs: number[] = [];
  const readyWait = (agent.config.initializeTimeoutMs ?? 30_000) + 5_000;
  for (let i = 0; i <= agent.pairs; i++) {
    // Alternate which side goes first, so neither always runs right after the other's dispose.
    const order = i % 2 === 0 ? (['cold', 'warm'] as const) : (['warm', 'cold'] as const);
    for (const side of order) {
      if (side === 'warm') {
        await poolReady(warm, readyWait);
        const sample = await startToReady(warm, cwd);
        if (i > 0) warmMs.push(sample);
      } else {
        const sample = await startToReady(cold, cwd);
        if (i > 0) coldMs.push(sample);
      }
    }
  }
  const { warmStarts, coldStarts } = warm.processes!();
  if (coldStarts > 0) throw new Error(`${agent.label}: ${coldStarts} warm-side starts found no ready process`);
  await warm.close?.();
  return { cold: summarize(coldMs), warm: summarize(warmMs), warmStarts };
}

function qwenAgent(cleanup: Cleanup, modelUrl: string, pairCount: number): Agent {
  const home = cleanup.tempDir('subagentd-bench-qwen-');
  writeQwenSettings(home);
  return {
    label: 'Qwen Code 0.24.4 (`qwen --acp`)',
    pairs: pairCount,
    config: {
      command: process.execPath,
      args: [QWEN_ENTRY, '--acp'],
      env: { HOME: home, OPENAI_API_KEY: 'sk-fake', OPENAI_BASE_URL: modelUrl, OPENAI_MODEL: 'fake-model', NO_COLOR: '1' },
      initializeTimeoutMs: 60_000,
      disposeGraceMs: { stdin: 3_000, term: 2_000 },
    },
  };
}

export async function acpWarmBench(report: Report, cleanup: Cleanup, world: BenchWorld, options: AcpWarmOptions): Promise<void> {
  report.section(
    'ACP warm pool',
    'start→ready: `start` until it resolves (agent process spawned, `initialize` and `session/new` answered). Cold: no pool, ' +
      'the start spawns the agent. Warm: `warm: 1`, the start takes a pre-initialized process and sends only `session/new`; ' +
      'the replacement is waited for (untimed) before the next warm sample. Cold and warm alternate pair by pair, ' +
      'order swapped each pair, provider in this process. Each sample then runs its prompt and disposes the agent (untimed).',
  );
  const agents: Agent[] = [
    {
      label: 'SDK fixture agent (mode echo)',
      pairs: options.pairs,
      config: { command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'echo' }, disposeGraceMs: { stdin: 2000, term: 1000 } },
    },
  ];
  const qwenCached = existsSync(QWEN_ENTRY);
  if (qwenCached && options.qwenPairs > 0) {
    // Qwen's model: each sample's prompt gets one short answer (after start→ready is measured).
    const model = await startChatCompletionsServer({ fallback: () => textResponse(['ok']) });
    cleanup.defer('close the fake model server', () => model.close());
    agents.push(qwenAgent(cleanup, model.baseUrl, options.qwenPairs));
  }
  const table = new Table('ACP start→ready, cold vs warm (alternating pairs)', ['agent', 'pairs', 'cold p50 (min–max)', 'warm p50 (min–max)', 'cold ÷ warm', 'load avg']);
  const range = (s: Summary): string => `${ms(s.p50)} (${ms(s.min)}–${ms(s.max)})`;
  for (const agent of agents) {
    const loadBefore = formatLoad();
    const { cold, warm } = await pairs(agent, cleanup, world.workspace);
    table.row(agent.label, String(cold.n), range(cold), range(warm), ratio(cold.p50 / warm.p50), `${loadBefore} → ${formatLoad()}`);
    report.verdict(`warm ACP start→ready ≤ 0.5 s (${agent.label})`, ms(warm.p50), warm.p50 <= 500);
  }
  if (options.qwenPairs === 0) table.note('Qwen Code row left out (--quick).');
  else if (!qwenCached) table.note(`Qwen Code row absent: not in the real-agent cache (${QWEN_ENTRY}); the Qwen tests install it.`);
  table.note('p50 is the median of the measured pairs; min–max is the spread. One unmeasured pair first.');
  report.table(table);
}
