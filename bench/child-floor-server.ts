/** Entry point of the child agents' floor process: `node dist/bench/child-floor-server.js SOCKET SCRIPT SESSIONS_DIR`. */
import { listenChildFloor } from './child-floor.js';

const [path, script, sessionsDir] = process.argv.slice(2);
if (!path || !script || !sessionsDir) {
  process.stderr.write('usage: child-floor-server.js SOCKET SCRIPT SESSIONS_DIR\n');
  process.exit(2);
}
const server = await listenChildFloor(path, script, sessionsDir);
process.stdout.write(`listening on ${path}\n`);
const stop = (): void => void server.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
