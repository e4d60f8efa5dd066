/**
 * Editors over `subagentd connect`: the example VS Code extension's client code
 * (examples/vscode/src/pool-client.ts) driven over a vscode-jsonrpc connection to a real
 * `subagentd connect`, opened with the LSP `initialize` that vscode-languageclient sends (no
 * protocolVersion or clientInfo of ours; our fields in initializationOptions; no token, which
 * connect adds). The LSP session end (`shutdown`, `exit`) closes the connection, not the daemon.
 */
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createMessageConnection, ResponseError, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { delegate, INITIALIZATION_OPTIONS } from '../examples/vscode/src/pool-client.js';
import { CliSandbox, daemonPidsFor, EXAMPLES, HEAVY_TEST_MS } from './support/cli-harness.js';

let box: CliSandbox;
beforeAll(() => {
  box = new CliSandbox('subagentd-vscode-');
});
afterAll(async () => {
  await box.cleanup();
});

function editorConnection(): { connection: MessageConnection; exited: Promise<{ code: number | null }> } {
  const connect = box.spawn(['connect'], { timeoutMs: 60_000 });
  const connection = createMessageConnection(new StreamMessageReader(connect.child.stdout), new StreamMessageWriter(connect.child.stdin));
  connection.listen();
  return { connection, exited: connect.exited };
}

/** The shape of vscode-languageclient 9's initialize (fields as it fills them). */
const lspInitialize = (initializationOptions: unknown) => ({
  processId: process.pid,
  clientInfo: { name: 'Visual Studio Code', version: '1.99.0' },
  locale: 'en',
  rootPath: box.work,
  rootUri: pathToFileURL(box.work).href,
  capabilities: { workspace: { applyEdit: true, workspaceFolders: true }, textDocument: { synchronization: { dynamicRegistration: true } }, window: { workDoneProgress: true } },
  initializationOptions,
  trace: 'off',
  workspaceFolders: [{ uri: pathToFileURL(box.work).href, name: 'work' }],
});

it('accepts the language client initialize, runs the example extension delegation, and ends the session on exit', { timeout: HEAVY_TEST_MS }, async () => {
  const { connection, exited } = editorConnection();
  const init = await connection.sendRequest<{ protocolVersion: string; capabilities?: unknown; providers: Array<{ name: string }> }>(
    'initialize',
    lspInitialize(INITIALIZATION_OPTIONS),
  );
  expect(init.capabilities).toEqual({});
  expect(init.providers.map((p) => p.name)).toContain('spawn');
  await connection.sendNotification('initialized', {});

  const result = await delegate(connection, 'Summarise this repository', box.work, `scripted:${join(EXAMPLES, 'hello.json')}`);
  expect(result.stopReason).toBe('completed');
  expect(result.text).toContain('This repository is subagentd');

  expect(await connection.sendRequest('shutdown')).toBeNull();
  const [daemonPid] = daemonPidsFor(box.socket);
  await connection.sendNotification('exit');
  expect((await exited).code).toBe(0);
  // Only this connection ended: the shared daemon is still there.
  expect(daemonPidsFor(box.socket)).toEqual([daemonPid]);
  connection.dispose();
});

it('refuses an initialize that is neither ours nor LSP-style, naming the missing field', { timeout: HEAVY_TEST_MS }, async () => {
  const { connection, exited } = editorConnection();
  const error = await connection.sendRequest('initialize', { clientInfo: { name: 'x', version: '1' } }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ResponseError);
  expect((error as ResponseError<{ field?: string }>).data?.field).toBe('/protocolVersion');
  // And an LSP client that states an incompatible protocol version in its options is refused too.
  const mismatch = await connection.sendRequest('initialize', lspInitialize({ protocolVersion: '9.0.0' })).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect((mismatch as ResponseError<unknown>).message).toContain('protocol version mismatch');
  connection.dispose();
  await box.run(['stop'], { timeoutMs: 15_000 });
  await exited;
});
