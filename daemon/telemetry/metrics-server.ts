/**
 * `daemon --metrics HOST:PORT`: serves the Prometheus text format at `/metrics` over plain HTTP.
 * Loopback unless the config says otherwise (`metrics.allowRemote`): the metrics name providers
 * and clients, which is nobody else's business.
 */
import { createServer } from 'node:http';
import type { Daemon } from '../daemon.js';
import { isLoopback, listenOn } from '../listen/listen-on.js';
import { StartupError } from '../ops/startup-error.js';
import { DaemonMetrics } from './metrics.js';
import { addModelRequestSink } from './model-requests.js';

export interface MetricsListen {
  readonly host: string;
  readonly port: number;
  readonly allowRemote?: boolean;
}

/** Parses `--metrics`: `PORT`, `HOST:PORT` or `[V6]:PORT`; the host defaults to 127.0.0.1. */
export function parseListenAddress(value: string, flag: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]:|([^:]+):)?(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new StartupError(`${flag} must be PORT or HOST:PORT (e.g. 127.0.0.1:9464), got "${value}"`);
  return { host: match[1] ?? match[2] ?? '127.0.0.1', port };
}

export async function serveMetrics(daemon: Daemon, listen: MetricsListen): Promise<{ port: number; close(): Promise<void> }> {
  if (!isLoopback(listen.host) && listen.allowRemote !== true) {
    throw new StartupError(`refusing to serve metrics on ${listen.host}: loopback only unless metrics.allowRemote is true in the config`);
  }
  const metrics = new DaemonMetrics({
    admission: () => daemon.status().admission,
    connections: () => daemon.status().connections,
  });
  const unobserve = daemon.service.observe(metrics);
  const unsink = addModelRequestSink(metrics);
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the metrics are at /metrics\n');
      return;
    }
    metrics.text().then(
      (text) => response.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      (error: unknown) => {
        daemon.log.warn({ err: error }, 'metrics: collecting failed');
        response.writeHead(500, { 'content-type': 'text/plain' }).end('collecting metrics failed\n');
      },
    );
  });
  const port = await listenOn(server, listen.port, listen.host);
  daemon.log.info({ host: listen.host, port }, 'serving Prometheus metrics at /metrics');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        unobserve();
        unsink();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
