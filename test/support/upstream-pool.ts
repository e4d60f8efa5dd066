/**
 * What the pool-wide endpoint tests share: a streamed answer with usage, starting a spawn child on
 * a member, and reading a server's record of requests as a sliding window.
 */
import type { RemoteSubagentRun, RemoteSubagentService } from '../../client/index.js';
import { chunk, type ChatCompletionsServer, type ScriptedResponse } from './chat-completions-server.js';

/** An answer that streams for `ms` after its first chunk and reports `tokens` of usage (prompt + completion). */
export function usageAnswer(ms: number, tokens = 0): ScriptedResponse {
  const prompt = Math.floor(tokens * 0.75);
  return {
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      { wait: ms },
      {
        data: chunk(
          { content: 'done' },
          { finish_reason: 'stop', usage: { prompt_tokens: prompt, completion_tokens: tokens - prompt, total_tokens: tokens } },
        ),
      },
      { done: true },
    ],
  };
}

export const startChild = (service: RemoteSubagentService, name: string, signal: AbortSignal): Promise<RemoteSubagentRun> =>
  service.start('spawn', {
    prompt: [{ type: 'text', text: name }],
    parent: { sessionId: `pool-${name}`, cwd: process.cwd() },
    signal,
  }) as Promise<RemoteSubagentRun>;

/** The most requests the server received within any `windowMs` (by arrival), and when that window began. */
export function busiestWindow(server: ChatCompletionsServer, windowMs = 60_000): { count: number; from: number } {
  const times = server.requests.map((r) => r.receivedAt).sort((a, b) => a - b);
  let best = { count: 0, from: 0 };
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j]! <= times[i]! - windowMs) j++;
    if (i - j + 1 > best.count) best = { count: i - j + 1, from: times[j]! };
  }
  return best;
}

/** The endpoint's entries of every member's `status` (one endpoint per member here). */
export async function endpointStatuses(services: readonly RemoteSubagentService[]) {
  const statuses = await Promise.all(services.map((s) => s.ops.status()));
  return statuses.flatMap((s) => s.endpoints ?? []);
}
