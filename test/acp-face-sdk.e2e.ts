/**
 * `subagentd acp` driven by the ACP SDK's client side, as an editor would: initialize, a session
 * whose pooled child is prompted twice with streamed updates, a cancelled turn, and the session
 * loaded again by a new face process after the daemon restarted (history replayed, the child
 * continued). Then a child's permission prompt round-trips through the editor.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import * as acp from '@agentclientprotocol/sdk';
import { SDK_AGENT } from './fixtures/acp-harness.js';
import { CliSandbox, HEAVY_TEST_MS, waitUntil } from './support/cli-harness.js';
import { openAcpFace, type AcpFaceClient } from './support/face-harness.js';

let box: CliSandbox;
let config: string;
const faces: AcpFaceClient[] = [];

function face(args: string[]): AcpFaceClient {
  const opened = openAcpFace(box, ['--config', config, ...args]);
  faces.push(opened);
  return opened;
}

const initialize = (f: AcpFaceClient) =>
  f.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
const prompt = (f: AcpFaceClient, sessionId: string, text: string) =>
  f.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] });

beforeAll(() => {
  box = new CliSandbox('subagentd-acp-face-');
  config = box.file('config.json', {
    providers: [
      {
        type: 'acp',
        name: 'asking-agent',
        command: process.execPath,
        args: [SDK_AGENT],
        env: { ACP_FIXTURE_MODE: 'permission' },
        permission: 'ask',
        initializeTimeoutMs: 10_000,
      },
    ],
  });
});
afterAll(async () => {
  for (const f of faces) await f.close().catch(() => undefined);
  await box.cleanup();
});

it('opens a pooled child, prompts it twice, cancels a turn, and reloads it after a daemon restart', { timeout: 2 * HEAVY_TEST_MS }, async () => {
  const script = box.file('child.json', {
    steps: [
      { text: 'First answer.', finish: 'stop' },
      { text: 'Second answer.', finish: 'stop' },
      { text: 'Looking first.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' }, id: 'call-ls' }] },
      { delayMs: 60_000, text: 'never reached', finish: 'stop' },
    ],
  });
  const editor = face(['--model', `scripted:${script}`]);
  const init = await initialize(editor);
  expect(init.protocolVersion).toBe(acp.PROTOCOL_VERSION);
  expect(init.agentCapabilities?.loadSession).toBe(true);
  expect(init.agentInfo?.name).toBe('subagentd');

  const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: box.work, mcpServers: [] });
  expect(sessionId).toMatch(/^acp_/);

  expect(await prompt(editor, sessionId, 'Question one')).toEqual({ stopReason: 'end_turn' });
  expect(editor.agentText(sessionId)).toBe('First answer.');
  const second = editor.updates.length;
  expect(await prompt(editor, sessionId, 'Question two')).toEqual({ stopReason: 'end_turn' });
  expect(editor.agentText(sessionId, second)).toBe('Second answer.');

  // The third turn calls a tool, then hangs on the model: the editor cancels it.
  const third = editor.updates.length;
  const turn = prompt(editor, sessionId, 'Question three');
  await waitUntil(
    () => editor.updates.slice(third).some((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.status === 'completed'),
    20_000,
    'the tool call of the third turn',
  );
  const toolCall = editor.updates.slice(third).find((n) => n.update.sessionUpdate === 'tool_call');
  expect(toolCall?.update).toMatchObject({ toolCallId: 'call-ls', title: 'list_directory', kind: 'read' });
  await editor.agent.notify(acp.methods.agent.session.cancel, { sessionId });
  expect(await turn).toEqual({ stopReason: 'cancelled' });
  await editor.close();

  // The daemon restarts (drain); a new face process (a new editor window) loads the session.
  const restart = await box.run(['restart', '--timeout', '5', '--config', config]);
  expect(restart.code, restart.stderr).toBe(0);
  const reopened = face(['--model', `scripted:${script}`]);
  await initialize(reopened);
  await reopened.agent.request(acp.methods.agent.session.load, { sessionId, cwd: box.work, mcpServers: [] });
  const replay = reopened.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  const said = (kind: string) =>
    replay.filter((u) => u.sessionUpdate === kind).map((u) => (u as { content: { text: string } }).content.text);
  expect(said('user_message_chunk').slice(0, 3)).toEqual(['Question one', 'Question two', 'Question three']);
  expect(said('agent_message_chunk')).toEqual(expect.arrayContaining(['First answer.', 'Second answer.', 'Looking first.']));
  expect(replay.filter((u) => u.sessionUpdate === 'tool_call_update').map((u) => (u as { status: string }).status)).toEqual(['completed']);

  // The restored child continues: its model replays the script from the start (scripted rule).
  const fourth = reopened.updates.length;
  expect(await prompt(reopened, sessionId, 'Question four')).toEqual({ stopReason: 'end_turn' });
  expect(reopened.agentText(sessionId, fourth)).toBe('First answer.');
});

it("relays a child's permission prompt to the editor as session/request_permission and honours the answer", { timeout: HEAVY_TEST_MS }, async () => {
  const editor = face(['--provider', 'asking-agent']);
  await initialize(editor);
  const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: box.work, mcpServers: [] });
  editor.answerPermission = (request) => ({ outcome: { outcome: 'selected', optionId: request.options.find((o) => o.kind === 'allow_always')!.optionId } });
  expect(await prompt(editor, sessionId, 'Edit the config')).toEqual({ stopReason: 'end_turn' });
  expect(editor.permissionRequests).toHaveLength(1);
  expect(editor.permissionRequests[0]).toMatchObject({ sessionId, toolCall: { title: 'Edit config.json' } });
  expect(editor.agentText(sessionId)).toBe('permission: yes-always');

  editor.answerPermission = () => ({ outcome: { outcome: 'cancelled' } });
  const second = editor.updates.length;
  const answer = await prompt(editor, sessionId, 'Again').then(
    (r) => r,
    (e: unknown) => e,
  );
  expect(editor.permissionRequests).toHaveLength(2);
  // The fixture ends its turn `cancelled` when the permission was cancelled.
  expect(answer).toEqual({ stopReason: 'cancelled' });
  expect(editor.agentText(sessionId, second)).toBe('');
});

it("reads and writes through the editor's fs/* when the editor offers it", { timeout: HEAVY_TEST_MS }, async () => {
  const script = box.file('fs-child.json', {
    steps: [
      {
        toolCalls: [
          { name: 'editor_read_file', arguments: { path: 'notes.txt' }, id: 'call-read' },
          { name: 'editor_write_file', arguments: { path: 'out/summary.md', content: '# summary' }, id: 'call-write' },
          { name: 'editor_read_file', arguments: { path: '../outside.txt' }, id: 'call-escape' },
        ],
      },
      { text: 'Done with the files.', finish: 'stop' },
    ],
  });
  const editor = face(['--model', `scripted:${script}`]);
  editor.files.set(join(box.work, 'notes.txt'), 'unsaved buffer text');
  await editor.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: box.work, mcpServers: [] });
  expect(await prompt(editor, sessionId, 'Use the files')).toEqual({ stopReason: 'end_turn' });
  expect(editor.fsRequests).toEqual([
    { method: 'fs/read_text_file', params: { sessionId, path: join(box.work, 'notes.txt') } },
    { method: 'fs/write_text_file', params: { sessionId, path: join(box.work, 'out', 'summary.md'), content: '# summary' } },
  ]);
  const results = editor.updates.filter((n) => n.update.sessionUpdate === 'tool_call_update').map((n) => n.update as { toolCallId: string; status: string; content?: Array<{ content: { text: string } }> });
  expect(results.map((r) => [r.toolCallId, r.status])).toEqual([
    ['call-read', 'completed'],
    ['call-write', 'completed'],
    ['call-escape', 'failed'],
  ]);
  expect(results[0]!.content?.[0]?.content.text).toBe('unsaved buffer text');
  expect(editor.agentText(sessionId)).toBe('Done with the files.');
});
