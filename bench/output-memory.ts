/**
 * What a flood of child output costs the daemon's memory: an ACP agent replies with MiB (default
 * 50) of text to a daemon with the output cap capBytes (default: the daemon's own), while the
 * client streams the run's events. Measures the daemon's RSS before, its peak during (the
 * kernel's VmHWM, reset just before the flood) and the run index's growth. The section "memory"
 * of `npm run bench` runs it; `node dist/bench/output-memory.js [MiB] [capBytes]` runs it alone.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '../client/index.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const MIB = 1024 * 1024;

export interface OutputMemory {
  readonly mib: number;
  readonly rssBefore: number;
  readonly peak: number;
  readonly resultBytes: number;
  readonly streamedBytes: number;
  readonly indexGrowth: number;
  readonly diagnostic: string | undefined;
}

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`)) ?? '';
  return Number(/(\d+)/.exec(line)?.[1] ?? 0) * 1024;
}

export async function outputMemory(mib: number, capBytes?: number): Promise<OutputMemory> {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-outmem-'));
  const socket = join(dir, 'daemon.sock');
  const stateDir = join(dir, 'state');
  const config = join(dir, 'config.json');
  const agent = (bytes: number): Record<string, unknown> => ({
    type: 'acp', name: `flood-${bytes}`, command: process.execPath, args: [join(REPO, 'test', 'fixtures', 'acp-raw-agent.mjs')],
    env: { RAW_FLOOD_BYTES: String(bytes) },
  });
  const cap = capBytes === undefined ? {} : { limits: { maxOutputBytes: capBytes } };
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
    return { mib, rssBefore, peak, resultBytes: result.bytes, streamedBytes: result.streamed, indexGrowth, diagnostic: result.diagnostic };
  } finally {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

export const mibText = (n: number): string => `${(n / MIB).toFixed(1)} MiB`;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const m = await outputMemory(Number(process.argv[2] ?? 50), process.argv[3] === undefined ? undefined : Number(process.argv[3]));
  console.log(`child output ${m.mib} MiB: daemon RSS before ${mibText(m.rssBefore)}, peak ${mibText(m.peak)}, growth ${mibText(m.peak - m.rssBefore)}`);
  console.log(`result output ${mibText(m.resultBytes)}, streamed ${mibText(m.streamedBytes)}, run index grew ${mibText(m.indexGrowth)}`);
  console.log(`diagnostic: ${m.diagnostic ?? '(none)'}`);
}
