/** Entry point of the floor's echo server process: `node dist/bench/echo-server.js SOCKET`. */
import { listenEcho } from './echo-floor.js';

const path = process.argv[2];
if (!path) {
  process.stderr.write('usage: echo-server.js SOCKET\n');
  process.exit(2);
}
const server = await listenEcho(path);
process.stdout.write(`listening on ${path}\n`);
const stop = (): void => void server.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
