/**
 * Disposing a settled ACP child ends its agent promptly, for the four real agents of the
 * real-clients lane, offline against local fake model servers: Qwen Code 0.24.4 and Gemini CLI
 * 0.61.0 (which exit at stdin EOF), Codex through @zed-industries/codex-acp 0.16.0 and Claude
 * through @zed-industries/claude-agent-acp 0.23.1 (which ignore EOF, so the idle grace then
 * SIGTERM ends them). Each agent answers one prompt through its own wire; then the run is disposed
 * and the kernel is asked whether anything of the agent is left: its pid, its process group, and
 * any process running its package (an orphan re-parented away). Packages are installed from the
 * registry into the $TMPDIR cache (test/support/real-agents.ts); one that cannot be installed
 * fails the test. The dispose times are printed (and reported), never asserted.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AcpProviderConfig } from '../daemon/providers/acp/index.js';
import type { DaemonRun } from '../daemon/provider.js';
import { fakeHost, processGone, provider, request, textOf, waitFor, type Workspace } from './fixtures/acp-harness.js';
import { startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { startModelWiresServer, type ModelWiresServer } from './support/model-wires-server.js';
import { installCached, writeQwenSettings } from './support/real-agents.js';

const ANSWER = 'The fake model says hello.';

interface RealAgent {
  readonly label: string;
  /** What identifies this agent's processes in /proc/<pid>/cmdline. */
  readonly marker: string;
  readonly config: (home: string) => Omit<AcpProviderConfig, 'name'>;
}

let root: string;
let chat: ChatCompletionsServer;
let wires: ModelWiresServer;
const agents: RealAgent[] = [];
const timings: string[] = [];

/** Processes left of an agent: in its process group, or running its package anywhere. */
function leftovers(pid: number, marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z' && Number(entry) !== pid) continue;
      if (Number(pgrp) === pid || Number(entry) === pid || readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) found.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return found.filter((p) => p !== process.pid);
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'acp-real-dispose-'));
  chat = await startChatCompletionsServer({ fallback: () => textResponse([ANSWER]) });
  wires = await startModelWiresServer(ANSWER);
  const [qwen, gemini, codex, claude] = await Promise.all([
    installCached('@qwen-code/qwen-code', '0.24.4', 600_000),
    installCached('@google/gemini-cli', '0.61.0', 600_000),
    // The codex-acp binary is an optional (platform) dependency of the package.
    installCached('@zed-industries/codex-acp', '0.16.0', 600_000, { optional: true }),
    installCached('@zed-industries/claude-agent-acp', '0.23.1', 600_000),
  ]);
  const codexBin = join(codex.dir, 'node_modules', '@zed-industries', 'codex-acp-linux-x64', 'bin', 'codex-acp');
  agents.push(
    {
      label: 'Qwen Code 0.24.4',
      marker: qwen.packageDir,
      config: (home) => {
        writeQwenSettings(home);
        return {
          command: process.execPath,
          args: [join(qwen.packageDir, 'cli-entry.js'), '--acp'],
          env: { HOME: home, TMPDIR: home, OPENAI_API_KEY: 'sk-fake', OPENAI_BASE_URL: chat.baseUrl, OPENAI_MODEL: 'fake-model', NO_COLOR: '1' },
        };
      },
    },
    {
      label: 'Gemini CLI 0.61.0',
      marker: gemini.packageDir,
      config: (home) => ({
        command: process.execPath,
        args: [join(gemini.packageDir, 'bundle', 'gemini.js'), '--acp'],
        env: { HOME: home, TMPDIR: home, GEMINI_API_KEY: 'fake', GOOGLE_GEMINI_BASE_URL: wires.origin, NO_COLOR: '1' },
      }),
    },
    {
      label: 'Codex (codex-acp 0.16.0)',
      marker: codexBin,
      config: (home) => {
        const codexHome = join(home, 'codex-home');
        mkdirSync(codexHome, { recursive: true });
        // A custom model provider: the Responses wire at the fake server, keyed by OPENAI_API_KEY.
        writeFileSync(
          join(codexHome, 'config.toml'),
          ['model = "gpt-fake"', 'model_provider = "fake"', '[model_providers.fake]', 'name = "fake"', `base_url = "${wires.origin}/v1"`, 'wire_api = "responses"', 'env_key = "OPENAI_API_KEY"', ''].join('\n'),
        );
        return { command: codexBin, env: { HOME: home, TMPDIR: home, CODEX_HOME: codexHome, OPENAI_API_KEY: 'sk-fake', NO_COLOR: '1' } };
      },
    },
    {
      label: 'Claude (claude-agent-acp 0.23.1)',
      marker: claude.packageDir,
      config: (home) => ({
        command: process.execPath,
        args: [join(claude.packageDir, 'dist', 'index.js')],
        env: { HOME: home, TMPDIR: home, ANTHROPIC_BASE_URL: wires.origin, ANTHROPIC_API_KEY: 'sk-ant-fake', NO_COLOR: '1' },
      }),
    },
  );
}, 900_000);

afterAll(async () => {
  await chat?.close();
  await wires?.close();
  if (root) rmSync(root, { recursive: true, force: true });
  if (timings.length > 0) console.info(`dispose of a settled ACP child (idle grace, then SIGTERM):\n${timings.join('\n')}`);
});

describe('disposing a settled real ACP child', () => {
  for (const index of [0, 1, 2, 3]) {
    it(`agent ${index + 1} of 4 answers, is disposed, and leaves no process`, { timeout: 240_000 }, async () => {
      const agent = agents[index]!;
      const home = mkdtempSync(join(root, 'home-'));
      const work = mkdtempSync(join(root, 'work-'));
      const acp = provider({
        name: `real-${index}`,
        ...agent.config(home),
        initializeTimeoutMs: 120_000,
        permission: 'deny',
        fileAccess: { read: false, write: false },
      });
      const ws: Workspace = { root: work, outside: root, recordPath: join(root, 'none'), cleanup: async () => {} };
      const t0 = performance.now();
      const run = (await acp.start(request(ws, fakeHost(), { prompt: [{ type: 'text', text: 'Say hello.' }] }))) as DaemonRun & { pid: number };
      const pid = run.pid;
      const ready = performance.now() - t0;
      try {
        const result = await run.result;
        const answered = performance.now() - t0;
        expect(result.stopReason, `${agent.label}: ${result.diagnostic ?? ''}`).toBe('completed');
        expect(textOf(result.output)).toContain(ANSWER);
        expect(processGone(pid)).toBe(false);
        const t1 = performance.now();
        await run.dispose();
        const disposed = performance.now() - t1;
        timings.push(`${agent.label}: dispose ${Math.round(disposed)} ms (ready ${Math.round(ready)} ms, answered ${Math.round(answered)} ms)`);
        expect(processGone(pid)).toBe(true);
        // Helpers in the agent's group got SIGKILL as the agent exited: the kernel may take a moment.
        await waitFor(() => leftovers(pid, agent.marker).length === 0, 5_000, `${agent.label}'s helper processes to be gone`).catch(() => undefined);
        expect(leftovers(pid, agent.marker), `${agent.label} processes left`).toEqual([]);
      } finally {
        for (const left of leftovers(pid, agent.marker)) process.kill(left, 'SIGKILL');
      }
    });
  }
});
