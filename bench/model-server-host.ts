/**
 * The long-run bench's model, in its own process (so neither side it measures shares a thread
 * with it): the repo's chat-completions test server, whose every answer is a call of an unknown
 * (cheap) tool until the request carries `steps - 1` tool results, then a text answer. It records
 * when each request arrived (performance.now) and speaks to its parent over the fork IPC channel:
 *   → { baseUrl } once listening;  ← { steps } arms a run (clears the times);  ← 'times' → { times }.
 * It exits when the parent goes away (IPC disconnect), so it can't outlive the bench.
 * It keeps no request: the test server records each one with its parsed body, and a 1000-step
 * run's bodies (the whole history each) held across pairs grew its heap to gigabytes, whose GC
 * pauses fell on whichever run was measuring.
 */
import { startChatCompletionsServer, textResponse, toolCallResponse } from '../test/support/chat-completions-server.js';

let steps = 1;
let times: number[] = [];
const server = await startChatCompletionsServer({
  fallback: (body: { messages?: Array<{ role: string }> }) => {
    times.push(performance.now());
    server.requests.length = 0;
    const results = body.messages?.filter((m) => m.role === 'tool').length ?? 0;
    return results + 1 >= steps
      ? textResponse(['done after ', String(steps), ' steps'])
      : toolCallResponse([{ id: `call_${results}`, name: 'bench_noop', arguments: '{}' }]);
  },
});
process.on('message', (message: { steps: number } | 'times') => {
  if (message === 'times') {
    process.send!({ times });
  } else {
    steps = message.steps;
    times = [];
  }
});
process.once('disconnect', () => void server.close().finally(() => process.exit(0)));
process.send!({ baseUrl: server.baseUrl });
