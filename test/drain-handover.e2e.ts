/**
 * A drain hands a running child to the next daemon (issue #10 item 5). A `run/wait` pending across
 * `stop --drain` must answer the truth, HANDED_OVER (the run goes on elsewhere), never `aborted`;
 * the next daemon then answers with the real outcome, and a client with reconnect gets that
 * outcome from the same `wait()` it called before the drain.
 */
import { afterEach, expect, it } from 'vitest';
import { connect, type RemoteSubagentRun } from '../client/index.js';
import { chunk, startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { captureLogger } from './support/fake-daemon-peer.js';
import { RawPeer } from './support/raw-peer.js';
import { within } from './support/reconnect-harness.js';

const ENV = { env: { HANDOVER_TEST_KEY: 'k' } };
let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => undefined);
  cleanup = [];
});

/** A model whose second step is still streaming when the drain times out; the third finishes. */
async function slowModel(): Promise<ChatCompletionsServer> {
  const server = await startChatCompletionsServer();
  cleanup.push(() => server.close());
  const toolCall = { tool_calls: [{ index: 0, id: 'call-1', type: 'function', function: { name: 'list_directory', arguments: '{"path":"."}' } }] };
  server.enqueue(
    { type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { data: chunk(toolCall, { finish_reason: 'tool_calls' }) }, { done: true }] },
    { type: 'stream', steps: [{ repeat: { comment: 'keep-alive' }, everyMs: 100, forMs: 8000 }] },
    textResponse(['finished by the next daemon']),
  );
  return server;
}

async function daemonWith(server: ChatCompletionsServer): Promise<DaemonProcess> {
  const model = { baseUrl: server.baseUrl, apiKeyEnv: 'HANDOVER_TEST_KEY', default: 'test-model', maxRetries: 0 };
  return startDaemon({ model, detachGraceMs: 30_000 }, [], ENV);
}

async function untilSecondStep(server: ChatCompletionsServer): Promise<void> {
  const deadline = Date.now() + 5000;
  while (server.requests.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(server.requests.length).toBe(2);
}

const exited = (daemon: DaemonProcess): Promise<unknown> =>
  daemon.proc.exitCode !== null ? Promise.resolve(daemon.proc.exitCode) : new Promise((resolve) => daemon.proc.once('exit', resolve));

/** A slow model, a daemon on it, and the daemon that follows it after the drain; all stopped after the test. */
async function drainScene(): Promise<{ server: ChatCompletionsServer; daemon: DaemonProcess; restart(): Promise<DaemonProcess> }> {
  const server = await slowModel();
  const daemon = await daemonWith(server);
  let next: DaemonProcess | undefined;
  cleanup.push(async () => {
    await next?.stop();
    await daemon.stop();
  });
  return { server, daemon, restart: async () => (next = await restartDaemon(daemon, ENV)) };
}

it('a run/wait pending across a drain answers HANDED_OVER, and the next daemon answers completed', { timeout: 20_000 }, async () => {
  const { server, daemon, restart } = await drainScene();
  const peer = await RawPeer.initialized(daemon.socket);
  const started = (await peer.request('subagent/start', { provider: 'spawn', prompt: [{ type: 'text', text: 'long task' }], parent: { sessionId: 'p', cwd: daemon.dir } }))
    .result as { runId: string; runToken: string };
  await untilSecondStep(server);
  const waiting = peer.request('run/wait', { runId: started.runId }, 10_000);
  const gone = exited(daemon);
  await peer.request('daemon/shutdown', { drain: true, timeoutMs: 300 });
  const answer = await waiting;
  expect(answer.result).toBeUndefined();
  expect(answer.error?.data?.code).toBe('HANDED_OVER');
  expect(answer.error?.message).toMatch(/handed to the next daemon.*re-attach.*wait on the next daemon/);
  expect(await gone).toBe(0);

  const next = await restart();
  const again = await RawPeer.initialized(next.socket);
  expect((await again.request('run/attach', { runId: started.runId, runToken: started.runToken })).error).toBeUndefined();
  const result = (await again.request('run/wait', { runId: started.runId }, 10_000)).result;
  expect(result).toMatchObject({ stopReason: 'completed', output: [{ text: 'finished by the next daemon' }] });
  again.close();
  peer.close();
});

it("a reconnecting client's wait() across a drain resolves with the next daemon's outcome", { timeout: 30_000 }, async () => {
  const { server, daemon, restart } = await drainScene();
  const service = await connect({ socket: daemon.socket, logger: captureLogger(), reconnect: { maxAttempts: 100, initialDelayMs: 20, maxDelayMs: 100 } });
  cleanup.push(() => service.close());
  const run = (await service.start('spawn', { prompt: [{ type: 'text', text: 'long task' }], signal: new AbortController().signal, parent: { sessionId: 'p', cwd: daemon.dir } })) as RemoteSubagentRun;
  await untilSecondStep(server);
  const waited = run.wait();
  const ops = await connect({ socket: daemon.socket, logger: captureLogger() });
  const gone = exited(daemon);
  await ops.ops.shutdown({ drain: true, timeoutMs: 300 }).catch(() => undefined);
  await ops.close();
  expect(await gone).toBe(0);
  await restart();
  await expect(within(waited, 15_000, 'the handed-over wait')).resolves.toMatchObject({
    stopReason: 'completed',
    output: [{ type: 'text', text: 'finished by the next daemon' }],
  });
  await expect(within(run.result, 1000, 'the run result')).resolves.toMatchObject({ stopReason: 'completed' });
});
