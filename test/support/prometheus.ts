/**
 * A real Prometheus server (Debian's `prometheus`) scraping one target every second, on a free
 * loopback port with its own temp storage; stopped and removed by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Prometheus {
  readonly url: string;
  /** One instant query's result as numbers (one per series), or [] while it has none. */
  query(promql: string): Promise<number[]>;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export async function startPrometheus(target: string, binary = 'prometheus'): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-prom-'));
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    ['global:', '  scrape_interval: 1s', '  evaluation_interval: 1s', 'scrape_configs:', '  - job_name: subagentd', '    static_configs:', `      - targets: ['${target}']`, ''].join('\n'),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  const proc: ChildProcess = spawn(binary, [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const spawnFailed = new Promise<never>((_, reject) => proc.once('error', (error) => reject(new Error(`cannot run ${binary} (apt-get install -y prometheus): ${error.message}`))));
  spawnFailed.catch(() => undefined);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null && proc.pid !== undefined) {
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await Promise.race([fetch(`${url}/-/ready`).then((r) => r.ok, () => false), spawnFailed]);
      if (ready) break;
      if (proc.exitCode !== null) throw new Error(`prometheus exited ${proc.exitCode}: ${output}`);
      if (Date.now() > deadline) throw new Error(`prometheus not ready within 30 s: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    async query(promql) {
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await response.json()) as { status: string; error?: string; data?: { result: Array<{ value: [number, string] }> } };
      if (body.status !== 'success') throw new Error(`PromQL ${promql}: ${body.error ?? response.status}`);
      return (body.data?.result ?? []).map((series) => Number(series.value[1]));
    },
    stop,
  };
}
