/**
 * `subagentd connect`: the stdio relay for editor extensions. It speaks the protocol on
 * stdin/stdout and relays every message both ways to the shared daemon (starting it when none
 * answers), so a client that can only spawn a process still shares the pool. The one thing it
 * adds is the daemon's token, in every `initialize` request until one is accepted (a client may
 * retry after a malformed first one); the request is rewritten as a parsed message, never by
 * editing its text. After that, bytes pass through untouched.
 *
 * Exits 0 when stdin closes (the editor went away) and 1 with a line on stderr when the daemon
 * goes away, so an editor restarts it as it would a crashed language server.
 */
import { createConnection } from 'node:net';
import { ensureDaemon } from '../client/auto-start.js';
import { readTokenFile, tokenPathFor } from '../common/daemon-token.js';
import type { CommonSettings } from './options.js';
import { socketAccepts } from '../common/socket-probe.js';
import { frameBody } from '../protocol/index.js';
import { CLIENT_FRAME_LIMITS } from '../common/frame-reader.js';
import { FrameSplitter } from '../common/frame-splitter.js';

/** The relay's bounds: the daemon applies its own; these only keep a corrupt length from piling up here. */
const RELAY_LIMITS = CLIENT_FRAME_LIMITS;

/** The bodies of a Content-Length framed byte stream (common/frame-splitter.ts), batch by batch. */
class Bodies {
  private bodies: Buffer[] = [];
  private unreadable = false;
  private readonly splitter = new FrameSplitter(RELAY_LIMITS, (buffer, start, end) => this.bodies.push(buffer.subarray(start, end)), () => (this.unreadable = true));

  /** Complete bodies, or undefined when the stream's framing is not ours (the rest is `drain()`). */
  push(chunk: Buffer): Buffer[] | undefined {
    this.splitter.push(chunk);
    if (this.unreadable) return undefined;
    const bodies = this.bodies;
    this.bodies = [];
    return bodies;
  }

  /** Whatever is buffered and not yet a complete frame. */
  drain(): Buffer {
    return this.splitter.rest();
  }
}

type Message = { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };

function parse(body: Buffer): Message | undefined {
  try {
    const message: unknown = JSON.parse(body.toString('utf8'));
    return typeof message === 'object' && message !== null && !Array.isArray(message) ? (message as Message) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Adds the token to each `initialize` request until the daemon accepts one. Watches the daemon's
 * replies to those requests' ids to learn which one was accepted; then both directions pass raw.
 */
export class TokenInjector {
  private readonly pendingInitialize = new Set<string>();
  private readonly fromClient = new Bodies();
  private readonly fromDaemon = new Bodies();
  /** Set once an `initialize` was accepted, or the peer's bytes are not frames we can read. */
  private passThrough = false;

  constructor(private readonly token: string | undefined) {
    if (token === undefined) this.passThrough = true;
  }

  /** Bytes from the client, rewritten as needed, to send to the daemon. */
  clientBytes(chunk: Buffer): Buffer {
    if (this.passThrough) return chunk;
    const bodies = this.fromClient.push(chunk);
    if (bodies === undefined) return this.giveUp();
    return Buffer.concat(bodies.map((body) => this.rewrite(body)));
  }

  /** Bytes from the daemon, passed on unchanged; read only to spot the accepted `initialize`. */
  daemonBytes(chunk: Buffer): Buffer {
    if (this.passThrough || this.pendingInitialize.size === 0) return chunk;
    for (const body of this.fromDaemon.push(chunk) ?? []) {
      const reply = parse(body);
      const id = reply && reply.method === undefined ? JSON.stringify(reply.id) : undefined;
      if (id === undefined || !this.pendingInitialize.delete(id)) continue;
      if (reply!.result !== undefined && reply!.error === undefined) this.passThrough = true;
    }
    return chunk;
  }

  /** The client's framing is not ours: stop interpreting and let the daemon judge the bytes. */
  private giveUp(): Buffer {
    this.passThrough = true;
    return this.fromClient.drain();
  }

  private rewrite(body: Buffer): Buffer {
    const message = parse(body);
    if (message?.method !== 'initialize' || message.id === undefined) return frameBody(body);
    this.pendingInitialize.add(JSON.stringify(message.id));
    const params = message.params;
    if (typeof params !== 'object' || params === null || Array.isArray(params) || 'token' in params) return frameBody(body);
    return frameBody(Buffer.from(JSON.stringify({ ...message, params: { ...params, token: this.token } })));
  }
}


export async function connectCommand(settings: CommonSettings): Promise<number> {
  await ensureDaemon({
    socket: settings.socket,
    stateDir: settings.stateDir,
    ...(settings.configPath !== undefined && { config: settings.configPath }),
  });
  const injector = new TokenInjector(readTokenFile(tokenPathFor(settings.socket)));
  const socket = createConnection(settings.socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return new Promise<number>((resolve) => {
    let editorGone = false;
    process.stdin.on('data', (chunk: Buffer) => {
      const bytes = injector.clientBytes(chunk);
      if (bytes.length > 0) socket.write(bytes);
    });
    process.stdin.on('end', () => {
      editorGone = true;
      socket.end();
    });
    socket.on('data', (chunk: Buffer) => process.stdout.write(injector.daemonBytes(chunk)));
    socket.on('error', () => undefined);
    // The daemon ended the session. Still there (an LSP `exit`): end too, 0, even though the editor
    // holds our stdin open (editors restart a server whose stdout closed). Gone: say so, exit 1.
    socket.on('close', () => {
      if (editorGone) return resolve(0);
      process.stdin.destroy();
      void socketAccepts(settings.socket).then((alive) => {
        if (alive) return resolve(0);
        process.stderr.write(`subagentd connect: the daemon at ${settings.socket} closed the connection; restart the relay to reconnect\n`);
        resolve(1);
      });
    });
  });
}
