/**
 * The parent-death guard of ACP agents (Linux has no prctl(PR_SET_PDEATHSIG) from Node, and an
 * arbitrary agent cannot be made to watch a pipe). One small process per daemon, started with the
 * first agent: its stdin is a pipe whose write end only the daemon holds, so the kernel closes it
 * however the daemon dies (kill -9 included). On EOF it reaps the groups that daemon recorded
 * (agent-groups.ts) and exits; after a clean shutdown there are none left to reap.
 *
 * Usage: node agent-sentinel.js <agents dir> <daemon pid>
 */
import { pino } from 'pino';
import { reapAgentGroups } from './agent-groups.js';

const [dir, daemonPid] = process.argv.slice(2);
if (dir !== undefined && daemonPid !== undefined) {
  // Signals meant for the daemon's terminal or group are not for us: only EOF ends the watch.
  for (const signal of ['SIGINT', 'SIGHUP', 'SIGTERM'] as const) process.on(signal, () => {});
  process.stdin.on('error', () => {});
  process.stdin.resume();
  process.stdin.once('close', () => {
    void reapAgentGroups(dir, pino({ level: 'silent' }), undefined, Number(daemonPid)).finally(() => process.exit(0));
  });
}
