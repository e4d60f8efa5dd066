/**
 * `subagentd connect`: the stdio forwarder for editor extensions. It speaks the protocol on
 * stdin/stdout and relays every byte both ways to the shared daemon (starting it when none
 * answers), so a client that can only spawn a process still shares the pool. The one thing it
 * adds is the daemon's token in `initialize`: the extension runs as the same user, through us.
 * It exits when stdin closes or the daemon goes away.
 */
import { createConnection } from 'node:net';
import { ensureDaemon } from '../client/auto-start.js';
import { readTokenFile, tokenPathFor } from '../daemon/auth-token.js';
import type { CommonSettings } from '../daemon/cli/options.js';

/** Rewrites frames until `initialize` has passed, then relays raw bytes. */
class InitializeTokenInjector {
  private buffer = Buffer.alloc(0);
  done = false;
  constructor(private readonly token: string | undefined) {}

  /** Returns the bytes to forward now. */
  push(chunk: Buffer): Buffer {
    if (this.done) return chunk;
    this.buffer = Buffer.concat([this.buffer, chunk]);
    const out: Buffer[] = [];
    while (!this.done) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) break;
      const match = /content-length:\s*(\d+)/i.exec(this.buffer.subarray(0, end).toString('ascii'));
      if (!match) {
        // Not a frame we understand: stop interpreting and let the daemon judge the bytes.
        this.done = true;
        break;
      }
      const total = end + 4 + Number(match[1]);
      if (this.buffer.length < total) break;
      const body = this.buffer.subarray(end + 4, total);
      this.buffer = this.buffer.subarray(total);
      out.push(this.rewrite(body));
    }
    if (this.done) {
      out.push(this.buffer);
      this.buffer = Buffer.alloc(0);
    }
    return Buffer.concat(out);
  }

  private rewrite(body: Buffer): Buffer {
    let message: { method?: string; params?: { token?: string } };
    try {
      message = JSON.parse(body.toString('utf8')) as typeof message;
    } catch {
      return frame(body);
    }
    if (message.method !== 'initialize') return frame(body);
    this.done = true;
    if (this.token === undefined || typeof message.params !== 'object' || message.params === null || message.params.token !== undefined) {
      return frame(body);
    }
    return frame(Buffer.from(JSON.stringify({ ...message, params: { ...message.params, token: this.token } })));
  }
}

const frame = (body: Buffer): Buffer => Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]);

export async function connectCommand(settings: CommonSettings): Promise<number> {
  await ensureDaemon({
    socket: settings.socket,
    stateDir: settings.stateDir,
    ...(settings.configPath !== undefined && { config: settings.configPath }),
  });
  const injector = new InitializeTokenInjector(readTokenFile(tokenPathFor(settings.socket)));
  const socket = createConnection(settings.socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return new Promise<number>((resolve) => {
    process.stdin.on('data', (chunk: Buffer) => {
      const bytes = injector.push(chunk);
      if (bytes.length > 0) socket.write(bytes);
    });
    process.stdin.on('end', () => socket.end());
    socket.pipe(process.stdout);
    socket.on('error', () => undefined);
    // The daemon ended the session (an LSP `exit`, a stop): end too, even though the editor
    // still holds our stdin open; editors restart a server whose stdout closed.
    socket.on('close', () => {
      process.stdin.destroy();
      resolve(0);
    });
  });
}
