/**
 * A client in its own process, for fault tests that kill it: connects to the daemon at argv[2],
 * starts `argv[3]` runs of the echo fixture's "hang" prompt, prints one JSON line with their run
 * ids, and then waits to be killed (it exits by itself after 60 s, so it can never linger).
 *
 * Run from the build: node dist/test/support/load-child-client.js SOCKET [COUNT]
 */
import { connect } from '../../client/index.js';

const socket = process.argv[2];
const count = Number(process.argv[3] ?? '1');
if (!socket || !Number.isInteger(count) || count < 1 || count > 100) {
  process.stderr.write('usage: load-child-client SOCKET [COUNT 1..100]\n');
  process.exit(2);
}

setTimeout(() => process.exit(3), 60_000).unref();

const service = await connect({ socket, clientInfo: { name: 'doomed-child', version: '0' }, requestTimeoutMs: 10_000 });
const runIds: string[] = [];
for (let i = 0; i < count; i++) {
  const run = await service.start('echo', {
    prompt: [{ type: 'text', text: 'hang' }],
    parent: { sessionId: `doomed-${process.pid}`, cwd: '/tmp' },
    signal: new AbortController().signal,
  });
  runIds.push(run.id);
}
process.stdout.write(`${JSON.stringify({ pid: process.pid, runIds })}\n`);
// Stay connected until killed (or the 60 s bound above).
setInterval(() => undefined, 1000);
