/**
 * `node dist/bench/output-memory.js [MiB] [capBytes]`: an ACP agent replies with MiB (default 50)
 * of text to a daemon with the output cap capBytes (default: the daemon's default), while the client streams the run's events. Prints the
 * daemon's RSS before, its peak during (VmHWM), the result's size and the run index's growth.
 * Issue #10 item 8a's figure: peak RSS growth under 64 MiB and a capped record.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect } from '../client/index.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const MIB = 1024 * 1024;

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`)) ?? '';
  return Number(/(\d+)/.exec(line)?.[1] ?? 0) * 1024;
}

async function main(): Promise<void> {
  const mib = Number(process.argv[2] ?? 50);
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-outmem-'));
  const socket = join(dir, 'daemon.sock');
  const stateDir = join(dir, 'state');
  const config = join(dir, 'config.json');
  const agent = (bytes: number): Record<string, unknown> => ({
    type: 'acp', name: `flood-${bytes}`, command: process.execPath, args: [join(REPO, 'test', 'fixtures', 'acp-raw-agent.mjs')],
    env: { RAW_FLOOD_BYTES: String(bytes) },
  });
  const cap = process.argv[3] === undefined ? {} : { limits: { maxOutputBytes: Number(process.argv[3]) } };
  writeFileSync(config, JSON.stringify({ ...cap, providers: [agent(64 * 1024), agent(mib * MIB)] }));
  const daemon = spawn(process.execPath, [join(REPO, 'dist', 'cli', 'main.js'), 'daemon', '--socket', socket, '--state-dir', stateDir, '--config', config], { stdio: 'ignore' });
  try {
    for (let i = 0; i < 200 && !(existsSync(`${socket}.token`) && existsSync(socket)); i++) await new Promise((r) => setTimeout(r, 50));
    const service = await connect({ socket });
    const once = async (name: string): Promise<{ bytes: number; diagnostic: string | undefined; streamed: number }> => {
      let streamed = 0;
      const run = await service.start(name, {
        prompt: [{ type: 'text', text: 'go' }], signal: new AbortController().signal, parent: { sessionId: 'bench', cwd: dir },
        onEvent: (event) => { if (event.kind === 'text-delta') streamed += Buffer.byteLength(event.text); },
      });
      const result = await run.result;
      await run.dispose();
      const bytes = result.output.reduce((n, b) => n + (b.type === 'text' ? Buffer.byteLength(b.text) : 0), 0);
      return { bytes, diagnostic: result.diagnostic, streamed };
    };
    await once('flood-65536'); // warm: code loaded, first agent spawned
    const pid = daemon.pid!;
    const rssBefore = status(pid, 'VmRSS');
    // Peak from here on: `5 > clear_refs` resets VmHWM to the current RSS (start-up's peak is not the flood's).
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const indexBefore = statSync(join(stateDir, 'runs.jsonl')).size;
    const result = await once(`flood-${mib * MIB}`);
    const peak = status(pid, 'VmHWM');
    const indexGrowth = statSync(join(stateDir, 'runs.jsonl')).size - indexBefore;
    await service.close();
    const m = (n: number): string => `${(n / MIB).toFixed(1)} MiB`;
    console.log(`child output ${mib} MiB: daemon RSS before ${m(rssBefore)}, peak ${m(peak)}, growth ${m(peak - rssBefore)}`);
    console.log(`result output ${m(result.bytes)}, streamed ${m(result.streamed)}, run index grew ${m(indexGrowth)}`);
    console.log(`diagnostic: ${result.diagnostic ?? '(none)'}`);
  } finally {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
