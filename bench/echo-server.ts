/** Entry point of a floor's echo server process: `node dist/bench/echo-server.js SOCKET [library|frames|raw]`. */
import { listenEcho, type EchoKind } from './echo-floor.js';
import { listenRawEcho } from './raw-echo.js';

const path = process.argv[2];
const kind = (process.argv[3] ?? 'library') as EchoKind;
if (!path || !['library', 'frames', 'raw'].includes(kind)) {
  process.stderr.write('usage: echo-server.js SOCKET [library|frames|raw]\n');
  process.exit(2);
}
const server = kind === 'raw' ? await listenRawEcho(path) : await listenEcho(path, kind);
process.stdout.write(`listening on ${path}\n`);
const stop = (): void => void server.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
