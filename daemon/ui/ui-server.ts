/**
 * The web view (`subagentd ui`): a page served by the daemon on a loopback port, live over
 * server-sent events, with no front-end build (ui-page.ts is one HTML file with its script).
 *
 * Access, as Jupyter does it: `daemon/ui` mints a one-time token and answers a URL carrying it;
 * the first request with that token gets a session cookie (HttpOnly, SameSite=Strict) and is sent
 * on to the page, and the token is spent. Anything without the cookie is 401. A request whose
 * `Host` is not this loopback address is refused (DNS rebinding), and the two actions (cancel a
 * run, drain the daemon) are POSTs that must also carry an `x-subagentd-ui` header.
 *
 * Authority: whoever opened the page held the daemon's socket token (they asked over the wire),
 * and acts as the wire's operator methods do: drain (`daemon/shutdown`), cancel any run as its
 * owner would (`daemon/cancel`, with its descendants). The page cannot take a run over, read a
 * token, or start anything.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomBytes } from '../../common/node-builtins.js';
import { listenOn } from '../listen/listen-on.js';
import { addModelRequestSink } from '../telemetry/model-requests.js';
import { UI_PAGE } from './ui-page.js';
import { UiState, type UiUpdate } from './ui-state.js';
import type { Logger } from 'pino';
import type { StatusResult } from '../../protocol/index.js';
import type { SubagentService } from '../service/subagent-service.js';

/** How long a printed link stays usable. */
const TOKEN_TTL_MS = 10 * 60_000;
const POOL_EVERY_MS = 1000;

export interface UiServer {
  /** A fresh one-time URL. */
  mintUrl(): string;
  close(): Promise<void>;
}

/** What the web view needs of the daemon: daemon.ts passes itself, and the two never import each other. */
export interface UiDaemon {
  readonly service: SubagentService;
  readonly log: Logger;
  status(): StatusResult;
  close(options?: { drain?: boolean; timeoutMs?: number }): Promise<void>;
}

export async function startUi(daemon: UiDaemon, host = '127.0.0.1', port = 0): Promise<UiServer> {
  const state = new UiState();
  const unobserve = daemon.service.observe(state);
  const endpoints = new Map<string, { requests: number; rateLimited: number; errors: number }>();
  const unsink = addModelRequestSink({
    modelRequest(endpoint, status) {
      const counts = endpoints.get(endpoint) ?? { requests: 0, rateLimited: 0, errors: 0 };
      counts.requests += 1;
      if (status === 429) counts.rateLimited += 1;
      else if (status === 'error' || status >= 500) counts.errors += 1;
      endpoints.set(endpoint, counts);
    },
  });
  const oneTime = new Map<string, number>();
  const sessions = new Set<string>();
  const streams = new Set<ServerResponse>();

  const pool = (): unknown => {
    const status = daemon.status();
    return {
      daemon: { version: status.daemon.version, pid: status.daemon.pid, uptimeMs: status.uptimeMs, shuttingDown: status.shuttingDown },
      connections: status.connections,
      admission: { running: status.admission.running, queued: status.admission.queued, limits: status.admission.limits },
      providers: status.providers,
      endpoints: Object.fromEntries(endpoints),
    };
  };
  const send = (response: ServerResponse, event: string, data: unknown): void => void response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const unsubscribe = state.subscribe((update: UiUpdate) => {
    for (const response of streams) send(response, update.kind, update.kind === 'run' ? { ...update.run, transcript: undefined } : update);
  });
  const ticker = setInterval(() => {
    for (const response of streams) send(response, 'pool', pool());
  }, POOL_EVERY_MS);
  ticker.unref();

  let origin = '';
  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', origin);
    if (request.headers.host !== new URL(origin).host && request.headers.host !== `localhost:${new URL(origin).port}`) {
      response.writeHead(421, { 'content-type': 'text/plain' }).end('wrong host\n');
      return;
    }
    const token = url.searchParams.get('token');
    if (token !== null && url.pathname === '/') {
      const expires = oneTime.get(token);
      oneTime.delete(token);
      if (expires === undefined || expires < Date.now()) return unauthorized(response, 'this link was used already or has expired: run `subagentd ui` again');
      const session = randomBytes(24).toString('base64url');
      sessions.add(session);
      response.writeHead(303, { location: '/', 'set-cookie': `subagentd_ui=${session}; HttpOnly; SameSite=Strict; Path=/`, 'cache-control': 'no-store' }).end();
      return;
    }
    const cookie = /(?:^|;\s*)subagentd_ui=([A-Za-z0-9_-]+)/.exec(request.headers.cookie ?? '')?.[1];
    if (cookie === undefined || !sessions.has(cookie)) return unauthorized(response, 'open the link `subagentd ui` prints');
    if (request.method === 'GET' && url.pathname === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'" });
      response.end(UI_PAGE);
      return;
    }
    if (request.method === 'GET' && url.pathname === '/events') {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      streams.add(response);
      request.on('close', () => streams.delete(response));
      send(response, 'snapshot', { pool: pool(), runs: [...state.runs.values()] });
      return;
    }
    if (request.method === 'POST' && request.headers['x-subagentd-ui'] === '1') {
      const cancel = /^\/runs\/([A-Za-z0-9_-]{1,128})\/cancel$/.exec(url.pathname);
      if (cancel) {
        const runId = cancel[1]!;
        if (!daemon.service.ownerOf(runId)) return plain(response, 404, `no live run ${runId}`);
        await daemon.service.cancelAsOperator(runId);
        daemon.log.info({ runId }, 'run cancelled from the web view');
        return plain(response, 200, 'cancelled');
      }
      if (url.pathname === '/drain') {
        daemon.log.info('drain requested from the web view');
        setImmediate(() => void daemon.close({ drain: true }));
        return plain(response, 200, 'draining');
      }
    }
    plain(response, 404, 'not found');
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      daemon.log.warn({ err: error }, 'web view: request failed');
      if (!response.headersSent) plain(response, 500, error instanceof Error ? error.message : 'failed');
    });
  });
  origin = `http://${host}:${await listenOn(server, port, host)}`;
  daemon.log.info({ origin }, 'serving the web view');
  return {
    mintUrl() {
      const token = randomBytes(24).toString('base64url');
      oneTime.set(token, Date.now() + TOKEN_TTL_MS);
      return `${origin}/?token=${token}`;
    },
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(ticker);
        unsubscribe();
        unobserve();
        unsink();
        for (const response of streams) response.end();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function unauthorized(response: ServerResponse, why: string): void {
  plain(response, 401, `401 unauthorized: ${why}\n`);
}

function plain(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(text);
}
