/**
 * `npm run demo`: the main job for a newcomer. Delegates "Summarise this repository" through the
 * real CLI (`subagentd run`, which starts the shared daemon in the background when none runs) to
 * a `spawn` child on the offline scripted model, then says what a newcomer needs next: how long it
 * took, that the daemon is still running and how to stop it, and one thing to try. The answer is
 * on stdout, once; everything else is on stderr.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../cli/main.js', import.meta.url));
const started = process.hrtime.bigint();
const run = spawn(process.execPath, [cli, 'run', '--model', 'scripted:examples/hello.json', 'Summarise this repository'], { stdio: 'inherit' });
const code = await new Promise<number>((resolve) => run.once('close', (exit) => resolve(exit ?? 1)));
const seconds = Number(process.hrtime.bigint() - started) / 1e9;

const say = (text: string): void => void process.stderr.write(`${text}\n`);
if (code !== 0) {
  say(`\nThe demo failed (exit ${code}) after ${seconds.toFixed(1)} s; the lines above say why.`);
  process.exit(code);
}
const status = spawnSync(process.execPath, [cli, 'status', '--json'], { encoding: 'utf8' });
const daemon = status.status === 0 ? (JSON.parse(status.stdout) as { daemon: { pid: number } }).daemon : undefined;
say('');
say(`Done in ${seconds.toFixed(1)} s: a spawn child listed this folder, read README.md and answered (above, on stdout).`);
say(
  daemon
    ? `The daemon (pid ${daemon.pid}) is still running in the background, ready for the next delegation. Stop it with: node dist/cli/main.js stop`
    : 'The daemon has stopped already.',
);
say('Next, try a structured answer: node dist/cli/main.js run --schema examples/summary-schema.json --model scripted:examples/structured.json "summarise" --json');
