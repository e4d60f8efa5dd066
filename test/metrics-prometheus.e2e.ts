/**
 * `daemon --metrics`: a real daemon serves Prometheus text at /metrics, a real Prometheus
 * (Debian's) scrapes it every second, and PromQL through Prometheus's HTTP API counts exactly the
 * runs, tokens and 429s this test made. No label carries the prompt.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ContentBlock } from '../client/index.js';
import { errorResponse, textResponse } from './support/chat-completions-server.js';
import { CLI, startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { ModelServer } from './support/e2e-model-server.js';
import { startPrometheus, type Prometheus } from './support/prometheus.js';

const SECRET_PROMPT = 'the launch code is TANGERINE-7781';
let server: ModelServer;
let daemon: DaemonProcess;
let prometheus: Prometheus | undefined;
let metricsUrl: string;
const clients = new ClientPool();

beforeAll(async () => {
  server = await ModelServer.start();
  daemon = await startDaemon(
    { model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', maxRetries: 2 } },
    ['--metrics', '127.0.0.1:0'],
    { env: { TEST_KEY: 'sk-metrics' }, fixtures: false },
  );
  await waitFor(() => /metrics at (http:\/\/\S+)/.test(daemon.stderr()), 10_000, () => `the metrics address on stderr: ${daemon.stderr()}`);
  metricsUrl = /metrics at (http:\/\/\S+)/.exec(daemon.stderr())![1]!;
});

afterAll(async () => {
  await clients.closeAll();
  await prometheus?.stop();
  await daemon?.stop();
  await server?.close();
});

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];

it('Prometheus scrapes /metrics and PromQL returns the runs, tokens and 429s this test made', async () => {
  const service = await clients.connect(daemon.socket, { clientInfo: { name: 'metrics-e2e', version: '1.0' } });
  // Three runs; the second meets one 429 before its answer.
  server.enqueue(
    textResponse(['one'], { usage: { prompt_tokens: 10, completion_tokens: 1 } }),
    errorResponse(429, 'slow down', { 'retry-after': '0' }),
    textResponse(['two'], { usage: { prompt_tokens: 20, completion_tokens: 2 } }),
    textResponse(['three'], { usage: { prompt_tokens: 30, completion_tokens: 3 } }),
  );
  for (let i = 0; i < 3; i++) {
    const run = await service.start('spawn', { prompt: text(SECRET_PROMPT), parent: { sessionId: 'metrics-parent', cwd: '/tmp' }, signal: new AbortController().signal });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    await run.dispose();
  }

  const exposition = await (await fetch(metricsUrl)).text();
  expect(exposition).toContain('subagentd_runs_started_total{provider="spawn"} 3');
  expect(exposition).toContain('subagentd_process_resident_memory_bytes');
  expect(exposition).toContain('subagentd_nodejs_eventloop_lag_seconds');
  expect(exposition).not.toContain('TANGERINE');
  expect(exposition).not.toContain('/tmp');
  expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);

  prometheus = await startPrometheus(new URL(metricsUrl).host);
  const scraped = async (promql: string): Promise<number[]> => {
    let last: number[] = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      last = await prometheus!.query(promql);
      if (last.length > 0) return last;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`no series for ${promql} within 30 s`);
  };
  expect(await scraped('sum(subagentd_runs_started_total)')).toEqual([3]);
  expect(await scraped('sum by (stop_reason) (subagentd_runs_ended_total{provider="spawn"})')).toEqual([3]);
  expect(await scraped('sum(subagentd_tokens_total{direction="in", client="metrics-e2e"})')).toEqual([60]);
  expect(await scraped('sum(subagentd_tokens_total{direction="out"})')).toEqual([6]);
  expect(await scraped(`subagentd_model_rate_limited_total{endpoint="${new URL(server.baseUrl).origin}"}`)).toEqual([1]);
  expect(await scraped('sum(subagentd_model_requests_total{status="200"})')).toEqual([3]);
  expect(await scraped('subagentd_admission_wait_seconds_count{provider="spawn"}')).toEqual([3]);
  expect(await scraped('subagentd_runs_in_flight')).toEqual([0]);
  expect(await scraped('subagentd_connections')).toEqual([1]);
});

it('refuses a non-loopback metrics address, saying why', () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-metrics-'));
  const out = spawnSync(process.execPath, [CLI, 'daemon', '--socket', join(dir, 'd.sock'), '--state-dir', join(dir, 'state'), '--metrics', '0.0.0.0:0'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  rmSync(dir, { recursive: true, force: true });
  expect(out.status).not.toBe(0);
  expect(out.stderr).toContain('loopback only');
});
