/**
 * The long run of the structure-aware wire fuzzer (test/support/wire-fuzz.ts) against a real
 * daemon on a unix socket and loopback TCP:
 *
 *   npm run fuzz -- --frames 100000 [--seed N] [--clients 20] [--runs 50] [--connections 4] [--face-lines 2000]
 *
 * Then the MCP and ACP faces' stdin (test/support/face-fuzz.ts): `--face-lines` seeded lines
 * each, malformed, non-object and oversize among them.
 *
 * Prints the reports and exits 1 unless the daemon lived, every bystander and load run completed,
 * every connection kept answering, the daemon logged no unhandled rejection or uncaught
 * exception, and each face answered every line it had to (0 hangs) and was still running.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startLoadDaemon } from '../test/support/load-daemon.js';
import { runWireFuzz } from '../test/support/wire-fuzz.js';
import { tcpConfig } from '../test/support/wire-peers.js';
import { CliSandbox } from '../test/support/cli-harness.js';
import { runFaceFuzz } from '../test/support/face-fuzz.js';

const { values } = parseArgs({
  options: {
    frames: { type: 'string', default: '100000' },
    seed: { type: 'string' },
    clients: { type: 'string', default: '20' },
    runs: { type: 'string', default: '50' },
    connections: { type: 'string', default: '4' },
    'face-lines': { type: 'string', default: '2000' },
  },
});
const frames = Number(values.frames);
const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2_147_483_647;
const loadClients = Number(values.clients);
const runsPerClient = Number(values.runs);

const dir = mkdtempSync(join(tmpdir(), 'subagentd-fuzz-'));
const tcp = await tcpConfig(dir);
const daemon = await startLoadDaemon({ detachGraceMs: 0, tcp }).catch((error: unknown) => {
  rmSync(dir, { recursive: true, force: true });
  throw error;
});
const t0 = performance.now();
let last = 0;
try {
  console.log(`fuzzing ${frames} frames, seed ${seed}, ${loadClients} clients × ${runsPerClient} runs; daemon pid ${daemon.pid}`);
  const report = await runWireFuzz({
    target: { socket: daemon.socket, port: tcp.port },
    pid: daemon.pid,
    stderr: () => daemon.stderr(),
    frames,
    seed,
    loadClients,
    runsPerClient,
    connections: Number(values.connections),
    onProgress: (sent) => {
      if (sent - last >= 10_000) {
        last = sent;
        console.log(`  ${sent} frames, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      }
    },
  });
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seed, seconds: Number(seconds.toFixed(1)), ...report }, null, 2));
  const ok =
    report.daemonDeaths === 0 &&
    report.processFaults.length === 0 &&
    report.unanswered.length === 0 &&
    report.bystanderFailures.length === 0 &&
    report.loadFailures.length === 0 &&
    report.loadCompleted === loadClients * runsPerClient;
  let facesOk = true;
  const box = new CliSandbox('subagentd-fuzz-faces-');
  try {
    for (const face of ['mcp', 'acp'] as const) {
      const faceReport = await runFaceFuzz({ box, face, lines: Number(values['face-lines']), seed });
      console.log(JSON.stringify(faceReport));
      facesOk &&= faceReport.hangs.length === 0 && faceReport.alive && faceReport.garbage === 0 && faceReport.oversizeAnswered === (faceReport.byKind['oversize'] ?? 0);
    }
  } finally {
    await box.cleanup();
  }
  console.log(ok && facesOk ? 'PASS' : 'FAIL');
  process.exitCode = ok && facesOk ? 0 : 1;
} finally {
  await daemon.stop();
  rmSync(dir, { recursive: true, force: true });
}
