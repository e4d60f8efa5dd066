/**
 * Nothing lost: ownership outlives a connection (token re-attach within the grace period), a
 * daemon killed with SIGKILL leaves its runs answerable as interrupted to the next daemon, and
 * only one daemon owns a state dir.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { CLI, restartDaemon, startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';
import { chunk, startChatCompletionsServer, textResponse } from './support/chat-completions-server.js';

const parent = { sessionId: 'parent-1', cwd: '/tmp' };
const prompt = (text: string) => [{ type: 'text', text }];
const daemons: DaemonProcess[] = [];
afterEach(async () => {
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
});

async function respawn(old: DaemonProcess): Promise<DaemonProcess> {
  // Same socket, state dir and config: what `subagentd start` does after a crash.
  await new Promise<void>((resolve) => (old.proc.exitCode !== null || old.proc.signalCode !== null ? resolve() : old.proc.once('exit', () => resolve())));
  return restartDaemon(old, { env: { DURABILITY_TEST_KEY: 'k' } });
}

it('a run survives its connection closing and is re-attached with its token', async () => {
  const daemon = await startDaemon({ detachGraceMs: 10_000 });
  daemons.push(daemon);
  const first = await RawPeer.initialized(daemon.socket, 'first');
  const started = (await first.request('subagent/start', { provider: 'echo', prompt: prompt('steer'), parent })).result as {
    runId: string;
    runToken: string;
  };
  first.close();
  const second = await RawPeer.initialized(daemon.socket, 'second');
  expect((await second.request('run/attach', { runId: started.runId, runToken: 'wrong' })).error?.data?.code).toBe('NOT_OWNER');
  const attached = await second.request('run/attach', { runId: started.runId, runToken: started.runToken });
  expect(attached.error).toBeUndefined();
  expect(attached.result).toMatchObject({ run: { runId: started.runId, state: 'running', mine: true } });
  await second.request('run/sendMessage', { runId: started.runId, content: prompt('still here') });
  const end = await second.waitFor((m) => m.method === 'subagent/end');
  expect(end.params).toMatchObject({ runId: started.runId, stopReason: 'completed', result: { output: [{ text: 'still here' }] } });
  second.close();
});

it('after kill -9 the next daemon answers run/wait with an interrupted error, and the run is not shown running', async () => {
  const daemon = await startDaemon();
  daemons.push(daemon);
  const peer = await RawPeer.initialized(daemon.socket);
  const started = (await peer.request('subagent/start', { provider: 'echo', prompt: prompt('hang'), parent })).result as {
    runId: string;
    runToken: string;
  };
  const deadPid = daemon.proc.pid;
  daemon.proc.kill('SIGKILL');
  await peer.whenClosed;
  const next = await respawn(daemon);
  daemons.splice(0, 1, next);
  const again = await RawPeer.initialized(daemon.socket);
  const listed = (await again.request('runs/list', {})).result as { runs: Array<{ runId: string; state: string; stopReason?: string }> };
  expect(listed.runs.find((r) => r.runId === started.runId)).toMatchObject({ state: 'settled', stopReason: 'error' });
  // inspect's record carries the stored diagnostic, for anyone (no token needed to read why).
  const inspected = (await again.request('run/inspect', { runId: started.runId })).result as { run: { diagnostic?: string } };
  expect(inspected.run.diagnostic).toMatch(new RegExp(`interrupted: .*pid ${deadPid}`));
  expect((await again.request('run/wait', { runId: started.runId })).error?.data?.code).toBe('NOT_OWNER');
  expect((await again.request('run/attach', { runId: started.runId, runToken: started.runToken })).result).toMatchObject({ run: { mine: true } });
  const waited = (await again.request('run/wait', { runId: started.runId })).result as { stopReason: string; diagnostic: string };
  expect(waited.stopReason).toBe('error');
  expect(waited.diagnostic).toContain(`pid ${deadPid}`);
  expect(waited.diagnostic).toMatch(/interrupted/);
  again.close();
});

it('a settled child is resumed after the daemon restarted: the model sees the whole earlier conversation', async () => {
  const server = await startChatCompletionsServer();
  try {
    const model = { baseUrl: server.baseUrl, apiKeyEnv: 'DURABILITY_TEST_KEY', default: 'test-model', maxRetries: 0 };
    const daemon = await startDaemon({ model }, [], { env: { DURABILITY_TEST_KEY: 'k' } });
    daemons.push(daemon);
    const workspace = daemon.dir;
    server.enqueue(textResponse(['the first answer']));
    const peer = await RawPeer.initialized(daemon.socket);
    const started = (await peer.request('subagent/start', {
      provider: 'spawn',
      prompt: prompt('first task'),
      parent: { sessionId: 'p', cwd: workspace, delegationDepth: 2 },
      toolFilter: { deny: ['search_text'] },
    })).result as { runId: string; runToken: string };
    expect((await peer.request('run/wait', { runId: started.runId })).result).toMatchObject({ stopReason: 'completed' });
    daemon.proc.kill('SIGKILL');
    await peer.whenClosed;
    daemons.splice(0, 1, await respawn(daemon));

    const again = await RawPeer.initialized(daemon.socket);
    await again.request('run/attach', { runId: started.runId, runToken: started.runToken });
    server.enqueue(textResponse(['the second answer']));
    const resumed = await again.request('run/resume', { runId: started.runId, prompt: prompt('second task') });
    expect(resumed.error).toBeUndefined();
    const next = (resumed.result as { runId: string }).runId;
    const result = (await again.request('run/wait', { runId: next })).result as { stopReason: string; output: Array<{ text: string }> };
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ text: 'the second answer' }] });
    const sent = server.requests[1]!.body as { messages: Array<{ role: string; content: string }>; tools: Array<{ function: { name: string } }> };
    expect(sent.messages.map((m) => `${m.role}:${typeof m.content === 'string' ? m.content : ''}`).slice(1)).toEqual([
      'user:first task',
      'assistant:the first answer',
      'user:second task',
    ]);
    // The tool filter survived the restart; the depth did not drop.
    expect(sent.tools.map((t) => t.function.name)).not.toContain('search_text');
    const inspected = (await again.request('run/inspect', { runId: next })).result as { header: { delegationDepth: number } };
    expect(inspected.header.delegationDepth).toBe(3);
    again.close();
  } finally {
    await server.close();
  }
});

it('a drain that times out checkpoints a running child, and the next daemon continues it under the same run', async () => {
  const server = await startChatCompletionsServer();
  try {
    const daemon = await startDaemon({ model: { baseUrl: server.baseUrl, apiKeyEnv: 'DURABILITY_TEST_KEY', default: 'test-model', maxRetries: 0 } }, [], { env: { DURABILITY_TEST_KEY: 'k' } });
    daemons.push(daemon);
    const toolCall = { tool_calls: [{ index: 0, id: 'call-1', type: 'function', function: { name: 'list_directory', arguments: '{"path":"."}' } }] };
    server.enqueue(
      { type: 'stream', steps: [{ data: chunk({ role: 'assistant', content: '' }) }, { data: chunk(toolCall, { finish_reason: 'tool_calls' }) }, { done: true }] },
      // The second step is still streaming when the drain times out.
      { type: 'stream', steps: [{ repeat: { comment: 'keep-alive' }, everyMs: 100, forMs: 8000 }] },
      textResponse(['finished after the restart']),
    );
    const peer = await RawPeer.initialized(daemon.socket);
    const started = (await peer.request('subagent/start', { provider: 'spawn', prompt: prompt('long task'), parent: { sessionId: 'p', cwd: daemon.dir } }))
      .result as { runId: string; runToken: string };
    const deadline = Date.now() + 5000;
    while (server.requests.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const exited = new Promise((resolve) => daemon.proc.once('exit', resolve));
    await peer.request('daemon/shutdown', { drain: true, timeoutMs: 300 });
    expect(await exited).toBe(0);
    // The owner was told nothing final: the run is not over.
    expect(peer.notifications('subagent/end')).toHaveLength(0);
    daemons.splice(0, 1, await respawn(daemon));

    const again = await RawPeer.initialized(daemon.socket);
    const attached = await again.request('run/attach', { runId: started.runId, runToken: started.runToken });
    expect(attached.error).toBeUndefined();
    const result = (await again.request('run/wait', { runId: started.runId }, 10_000)).result as { stopReason: string; output: Array<{ text: string }> };
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ text: 'finished after the restart' }] });
    const resent = server.requests[2]!.body as { messages: Array<{ role: string; content: unknown }> };
    const roles = resent.messages.map((m) => m.role);
    expect(roles.slice(1, 4)).toEqual(['user', 'assistant', 'tool']); // the finished step survived
    expect(JSON.stringify(resent.messages.at(-1))).toMatch(/restarted while you worked/);
    again.close();
  } finally {
    await server.close();
  }
});

it('a second daemon on the same state dir is refused, naming the live one', async () => {
  const daemon = await startDaemon();
  daemons.push(daemon);
  const rival = spawn(process.execPath, [CLI, 'daemon', '--socket', `${daemon.socket}.2`, '--state-dir', daemon.stateDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  rival.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const guard = setTimeout(() => rival.kill('SIGKILL'), 10_000); // never leave it behind
  const code = await new Promise<number | null>((resolve) => rival.once('exit', resolve));
  clearTimeout(guard);
  expect(code).toBe(1);
  expect(err).toContain(`pid ${daemon.proc.pid}`);
  // The live daemon is unharmed.
  const peer = await RawPeer.initialized(daemon.socket);
  expect((await peer.request('daemon/status', {})).result).toMatchObject({ daemon: { pid: daemon.proc.pid } });
  peer.close();
});

it('a second daemon on the same socket is refused and leaves the first one serving', async () => {
  const daemon = await startDaemon();
  daemons.push(daemon);
  const token = readFileSync(`${daemon.socket}.token`, 'utf8');
  const rival = spawn(process.execPath, [CLI, 'daemon', '--socket', daemon.socket, '--state-dir', `${daemon.stateDir}-other`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  rival.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const guard = setTimeout(() => rival.kill('SIGKILL'), 10_000); // never leave it behind
  expect(await new Promise((resolve) => rival.once('exit', resolve))).toBe(1);
  clearTimeout(guard);
  expect(err).toMatch(/already listening/);
  expect(readFileSync(`${daemon.socket}.token`, 'utf8')).toBe(token);
  const peer = await RawPeer.initialized(daemon.socket);
  peer.close();
});
