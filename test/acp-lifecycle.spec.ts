/**
 * The acp provider's lifecycle against real agent processes: cancel, dispose and its kill
 * ladder, and every way an agent can fail before and after readiness. Each test checks the
 * kernel (pid gone, no zombie), not only what the provider reports.
 */
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import {
  fakeHost,
  processGone,
  provider,
  readRecord,
  recordedPids,
  request,
  sdkAgentConfig,
  textOf,
  waitFor,
  workspacePerTest,
} from './fixtures/acp-harness.js';

const ws = workspacePerTest();

async function startFailure(promise: Promise<unknown>): Promise<SubagentError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SubagentError);
  return error as SubagentError;
}

function onlyPid(): number {
  const pids = recordedPids(ws.recordPath);
  expect(pids).toHaveLength(1);
  return pids[0] as number;
}

describe('cancel after readiness', () => {
  it('settles aborted at once, sends session/cancel, and keeps the partial output', async () => {
    const host = fakeHost();
    const controller = new AbortController();
    const run = await provider(sdkAgentConfig(ws, 'slow')).start(request(ws, host, { signal: controller.signal }));
    await waitFor(() => host.events.some((e) => e.kind === 'text-delta'), 5_000, 'first chunk');
    const cancelledAt = performance.now();
    controller.abort();
    const result = await run.result;
    const settleMs = performance.now() - cancelledAt;
    expect(result.stopReason).toBe('aborted');
    expect(textOf(result.output)).toBe('working...');
    expect(settleMs).toBeLessThan(50);
    await waitFor(() => readRecord(ws.recordPath).find((e) => e.event === 'cancel'), 5_000, 'session/cancel at the agent');
    await run.dispose();
    expect(processGone(onlyPid())).toBe(true);
  });

  it('does not wait for an agent that ignores the cancel', async () => {
    const host = fakeHost();
    const controller = new AbortController();
    const run = await provider(sdkAgentConfig(ws, 'deaf')).start(request(ws, host, { signal: controller.signal }));
    await waitFor(() => host.events.length > 0, 5_000, 'first chunk');
    controller.abort();
    const result = await Promise.race([run.result, new Promise((r) => setTimeout(() => r('hung'), 1_000))]);
    expect(result).toMatchObject({ stopReason: 'aborted' });
    await run.dispose();
    expect(processGone(onlyPid())).toBe(true);
  });
});

describe('dispose', () => {
  it('cancels a running turn, kills and reaps the agent, and is idempotent', async () => {
    const run = await provider(sdkAgentConfig(ws, 'slow')).start(request(ws, fakeHost()));
    const pid = onlyPid();
    expect(processGone(pid)).toBe(false);
    const first = run.dispose();
    const second = run.dispose();
    await Promise.all([first, second]);
    expect(processGone(pid)).toBe(true);
    expect((await run.result).stopReason).toBe('aborted');
    await run.dispose();
  });

  it('ends a well-behaved agent by closing stdin, long before the default grace periods', async () => {
    const config = sdkAgentConfig(ws, 'reply');
    const { disposeGraceMs: _defaults, ...withDefaults } = config;
    const run = await provider(withDefaults).start(request(ws, fakeHost()));
    await run.result;
    const t0 = performance.now();
    await run.dispose();
    expect(performance.now() - t0).toBeLessThan(1_500);
    expect(processGone(onlyPid())).toBe(true);
    expect(readRecord(ws.recordPath).some((e) => e.event === 'closed')).toBe(true);
  });

  it('climbs the ladder to SIGTERM and SIGKILL for an agent that ignores stdin and SIGTERM', async () => {
    const grace = { stdin: 300, term: 300 };
    const run = await provider(sdkAgentConfig(ws, 'stubborn', { disposeGraceMs: grace })).start(request(ws, fakeHost()));
    expect((await run.result).stopReason).toBe('completed');
    const t0 = performance.now();
    await run.dispose();
    const elapsed = performance.now() - t0;
    // The turn is over, so the EOF wait is capped by idleStdin (default 200 ms).
    expect(elapsed).toBeGreaterThanOrEqual(Math.min(grace.stdin, 200) + grace.term - 20);
    expect(elapsed).toBeLessThan(3_000);
    expect(readRecord(ws.recordPath).some((e) => e.event === 'sigterm')).toBe(true);
    expect(processGone(onlyPid())).toBe(true);
  });
});

describe('failures after readiness settle error with the exit and stderr', () => {
  it('an agent crashing mid-prompt', async () => {
    const run = await provider(sdkAgentConfig(ws, 'crash')).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(textOf(result.output)).toBe('partial answer');
    expect(result.diagnostic).toContain('exited with code 3');
    expect(result.diagnostic).toContain('fixture: fatal error in the model client');
    expect(Buffer.byteLength(result.diagnostic ?? '')).toBeLessThanOrEqual(4096);
    await run.dispose();
    expect(processGone(onlyPid())).toBe(true);
  });

  it('an agent killed from outside', async () => {
    const run = await provider(sdkAgentConfig(ws, 'slow')).start(request(ws, fakeHost()));
    const pid = onlyPid();
    process.kill(pid, 'SIGKILL');
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('killed by SIGKILL');
    await run.dispose();
    expect(processGone(pid)).toBe(true);
  });

  it('an agent printing non-JSON on stdout mid-prompt', async () => {
    const run = await provider(sdkAgentConfig(ws, 'garbage-mid')).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('non-JSON-RPC output on stdout');
    expect(result.diagnostic).toContain('DEBUG: this line is not JSON');
    await run.dispose();
    expect(processGone(onlyPid())).toBe(true);
  });
});

describe('failures before readiness reject START_FAILED after killing and reaping', () => {
  it('an agent exiting before initialize', async () => {
    const error = await startFailure(provider(sdkAgentConfig(ws, 'exit-before-init')).start(request(ws, fakeHost())));
    expect(error.code).toBe('START_FAILED');
    expect(error.message).toContain('exited with code 2');
    expect(error.message).toContain('fixture: missing configuration file');
    expect(processGone(onlyPid())).toBe(true);
  });

  it('an agent printing a banner on stdout', async () => {
    const error = await startFailure(provider(sdkAgentConfig(ws, 'garbage')).start(request(ws, fakeHost())));
    expect(error.code).toBe('START_FAILED');
    expect(error.message).toContain('non-JSON-RPC output on stdout: "Welcome to the fixture agent v1.0!"');
    expect(error.message).toContain('fixture: about to print a banner on stdout');
    expect(processGone(onlyPid())).toBe(true);
  });

  it('an agent that never answers initialize', async () => {
    // Long enough for node to load the fixture and read the request even on a busy machine.
    const t0 = performance.now();
    const error = await startFailure(
      provider(sdkAgentConfig(ws, 'no-init', { initializeTimeoutMs: 3_000 })).start(request(ws, fakeHost())),
    );
    const elapsed = performance.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(2_950);
    expect(elapsed).toBeLessThan(6_000);
    expect(readRecord(ws.recordPath).some((e) => e.event === 'initialize')).toBe(true);
    expect(error.code).toBe('START_FAILED');
    expect(error.message).toContain('not ready within 3000 ms (no answer to initialize)');
    expect(error.message).toContain("raise the provider's initializeTimeoutMs");
    expect(error.message).toContain('licence server that never answers');
    expect(processGone(onlyPid())).toBe(true);
  });

  it('a command that does not exist or is not executable', async () => {
    const missing = await startFailure(
      provider({ name: 'acp-test', command: join(ws.outside, 'no-such-agent') }).start(request(ws, fakeHost())),
    );
    expect(missing.code).toBe('START_FAILED');
    expect(missing.message).toContain('was not found or is not executable');
    const script = join(ws.outside, 'agent.sh');
    await writeFile(script, '#!/bin/sh\n');
    await chmod(script, 0o644);
    const notExecutable = await startFailure(provider({ name: 'acp-test', command: script }).start(request(ws, fakeHost())));
    expect(notExecutable.code).toBe('START_FAILED');
  });

  it("a parent cwd that does not exist", async () => {
    const gone = join(ws.outside, 'deleted-project');
    const error = await startFailure(
      provider(sdkAgentConfig(ws, 'reply')).start(request(ws, fakeHost(), { parent: { sessionId: 'p', cwd: gone } })),
    );
    expect(error.code).toBe('START_FAILED');
    expect(error.message).toContain(gone);
    expect(recordedPids(ws.recordPath)).toEqual([]);
  });
});

describe('abort before readiness', () => {
  it('kills and reaps the agent and rejects ABORTED', async () => {
    const controller = new AbortController();
    const starting = provider(sdkAgentConfig(ws, 'no-init')).start(request(ws, fakeHost(), { signal: controller.signal }));
    await waitFor(() => readRecord(ws.recordPath).find((e) => e.event === 'initialize'), 5_000, 'initialize at the agent');
    const t0 = performance.now();
    controller.abort();
    const error = await startFailure(starting);
    expect(error.code).toBe('ABORTED');
    expect(performance.now() - t0).toBeLessThan(1_500);
    expect(processGone(onlyPid())).toBe(true);
  });

  it('spawns nothing for an already aborted signal', async () => {
    const error = await startFailure(
      provider(sdkAgentConfig(ws, 'reply')).start(request(ws, fakeHost(), { signal: AbortSignal.abort() })),
    );
    expect(error.code).toBe('ABORTED');
    expect(recordedPids(ws.recordPath)).toEqual([]);
  });
});
