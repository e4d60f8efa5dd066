/**
 * Token budgets against a real chat-completions server and a real daemon process:
 * `limits.lineageTokens` stops a delegating root once its lineage (it and its nested child) has
 * spent the budget, with a diagnostic naming budget and usage; `limits.clientTokensPerDay`
 * refuses a client's next start with BUDGET_EXCEEDED saying when it resets, and still does after
 * the daemon restarts.
 */
import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService } from '../client/index.js';
import { chunk, startChatCompletionsServer, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { killAndWait, restartDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { contentText, type WireMessage } from './support/e2e-model-server.js';
import { rejection } from './support/assertions.js';

const clients = new ClientPool();
const runs = new RunPool();
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
});

const usage = (prompt: number, completion: number) => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });

function say(text: string, tokens: [number, number]): ScriptedResponse {
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: text }) },
      { data: chunk({}, { finish_reason: 'stop', usage: usage(...tokens) }) },
      { done: true },
    ],
  };
}

function delegate(prompt: string, tokens: [number, number]): ScriptedResponse {
  const call = { index: 0, id: 'call_delegate', type: 'function', function: { name: 'subagent', arguments: JSON.stringify({ description: 'the child', prompt }) } };
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '', tool_calls: [call] }) },
      { data: chunk({}, { finish_reason: 'tool_calls', usage: usage(...tokens) }) },
      { done: true },
    ],
  };
}

async function scene(respond: (body: any) => ScriptedResponse, limits: Record<string, number>, extra: Record<string, unknown> = {}): Promise<{ server: ChatCompletionsServer; daemon: DaemonProcess }> {
  const server = await startChatCompletionsServer({ fallback: respond });
  const daemon = await startE2eDaemon(
    { model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model' }, limits, detachGraceMs: 0, ...extra },
    { TEST_KEY: 'sk-budgets' },
  );
  const made = { server, daemon };
  cleanup.push(() => server.close(), () => made.daemon.stop());
  return made;
}

async function start(service: RemoteSubagentService, prompt: string): Promise<RemoteSubagentRun> {
  return runs.track(
    (await service.start('spawn', {
      prompt: [{ type: 'text', text: prompt }],
      parent: { sessionId: 'budget-parent', cwd: tmpdir() },
      signal: new AbortController().signal,
    })) as RemoteSubagentRun,
  );
}

describe('token budgets', () => {
  it('limits.lineageTokens stops a delegating root after its child spent the lineage budget, naming budget and usage', async () => {
    const { server, daemon } = await scene(
      (body: { messages: WireMessage[] }) => {
        const task = contentText(body.messages.find((m) => m.role === 'user'));
        if (task.includes('CHILD')) return say('the child did a lot', [900, 300]);
        if (body.messages.some((m) => m.role === 'tool')) return say('root finished', [50, 5]);
        return delegate('CHILD: do the big part', [80, 20]);
      },
      { lineageTokens: 1000 },
      { delegation: { spawn: { providers: ['spawn'] } } },
    );
    const service = await clients.connect(daemon.socket);
    const result = await (await start(service, 'ROOT: delegate the work')).result;

    expect(result.stopReason).toBe('max-tokens');
    expect(result.diagnostic).toContain('limits.lineageTokens=1000');
    expect(result.diagnostic).toContain('used 1300 tokens');
    // The root's step and the child's, and no further root step once the lineage was spent.
    expect(server.requests.map((r) => contentText((r.body.messages as WireMessage[]).find((m) => m.role === 'user')).slice(0, 5))).toEqual(['ROOT:', 'CHILD']);
  }, 120_000);

  it('limits.clientTokensPerDay refuses a client\'s next start, saying when it resets, also after a restart', async () => {
    const made = await scene(() => say('spent', [120, 30]), { clientTokensPerDay: 100 });
    const spender = await clients.connect(made.daemon.socket, { clientInfo: { name: 'budget-client', version: '1.0' } });
    expect((await (await start(spender, 'use tokens')).result).stopReason).toBe('completed');

    const refused = await rejection(start(spender, 'once more'));
    expect(refused.code).toBe('BUDGET_EXCEEDED');
    expect(refused.message).toMatch(/budget-client.*150 tokens.*clientTokensPerDay=100.*resets at \d{4}-\d\d-\d\dT00:00:00\.000Z/);
    // Another client's budget is its own.
    const other = await clients.connect(made.daemon.socket, { clientInfo: { name: 'other-client', version: '1.0' } });
    expect((await (await start(other, 'mine')).result).stopReason).toBe('completed');

    await runs.disposeAll();
    await clients.closeAll();
    // Killed, as a crash would: the counts were on disk before the step's end was reported.
    await killAndWait(made.daemon);
    made.daemon = await restartDaemon(made.daemon, { env: { TEST_KEY: 'sk-budgets' }, fixtures: false });
    const again = await clients.connect(made.daemon.socket, { clientInfo: { name: 'budget-client', version: '2.0' } });
    expect((await rejection(start(again, 'after the restart'))).code).toBe('BUDGET_EXCEEDED');
    expect(made.server.requests).toHaveLength(2);
  }, 120_000);
});
