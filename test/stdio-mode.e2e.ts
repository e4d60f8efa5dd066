/**
 * `subagentd daemon --stdio`: one private client on stdin/stdout, no socket, no token; stdout
 * carries only protocol frames; the daemon exits when its client closes stdin.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { CLI, FIXTURE_PROVIDERS } from './support/daemon-process.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function frame(message: unknown): string {
  const body = JSON.stringify(message);
  return `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

it('serves one client on stdio and exits when stdin closes', async () => {
  dir = mkdtempSync(join(tmpdir(), 'subagentd-stdio-'));
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ providerModules: [FIXTURE_PROVIDERS] }));
  const child = spawn(process.execPath, [CLI, 'daemon', '--stdio', '--state-dir', join(dir, 'state'), '--config', config], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const parent = { sessionId: 'p', cwd: '/tmp' };
  child.stdin.write(frame({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'stdio-test', version: '0' } } }));
  child.stdin.write(frame({ jsonrpc: '2.0', id: 2, method: 'subagent/start', params: { provider: 'echo', prompt: [{ type: 'text', text: 'echo over stdio' }], parent } }));
  const deadline = Date.now() + 10_000;
  while (!stdout.includes('"method":"subagent/end"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  // Every byte on stdout is a well-formed frame: logs never leak into the protocol stream.
  const messages: Array<{ id?: number; method?: string; result?: unknown; params?: unknown }> = [];
  let rest = stdout;
  while (rest.length > 0) {
    const m = /^Content-Length: (\d+)\r\n\r\n/.exec(rest);
    expect(m, `unframed bytes on stdout: ${rest.slice(0, 80)}`).not.toBeNull();
    const start = m![0].length;
    const body = Buffer.from(rest.slice(start)).subarray(0, Number(m![1])).toString();
    messages.push(JSON.parse(body));
    rest = rest.slice(start + body.length);
  }
  expect(messages.find((m) => m.id === 1)?.result).toMatchObject({ daemon: { pid: child.pid } });
  expect(messages.find((m) => m.method === 'subagent/end')?.params).toMatchObject({ stopReason: 'completed', result: { output: [{ text: 'echo over stdio' }] } });
  expect(existsSync(join(dir, 'state', 'daemon.lock'))).toBe(true);
  child.stdin.end();
  expect(await exited).toBe(0);
  expect(existsSync(join(dir, 'state', 'daemon.lock'))).toBe(false);
});
