/**
 * The harness lane: the published deepseek-harness packages (a real agent loop, the harness's own
 * `subagent` tool) with `subagentd/harness` loaded, delegating to a real daemon process. The
 * parent's model is scripted inside the harness app; the children's model is either the daemon's
 * scripted adapter or the chat-completions server (to see what a child's model was sent).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../client/index.js';
import { textResponse } from './support/chat-completions-server.js';
import { REPO, type DaemonProcess } from './support/daemon-process.js';
import { startE2eDaemon } from './support/e2e-daemon.js';
import { ModelServer, contentText } from './support/e2e-model-server.js';
import { ensureHarnessPackages, makeHarnessAppDir, runHarnessApp, type HarnessAppOutput } from './support/harness-packages.js';
import { rejection } from './support/assertions.js';

const HELLO = `scripted:${join(REPO, 'examples', 'hello.json')}`;
const FIXTURE = join(REPO, 'test', 'fixtures', 'harness-parent-log.json');

let appDir: string;

beforeAll(() => {
  appDir = makeHarnessAppDir(ensureHarnessPackages());

  writeFileSync(join(appDir, 'placeholder'), '');
}, 240_000);
afterAll(() => {
  if (appDir) rmSync(appDir, { recursive: true, force: true });
});

/** A daemon-side scripted model for children, written into the app dir. */
function script(name: string, steps: object[]): string {
  const path = join(appDir, `${name}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

const delegate = (tool: string, description: string, prompt: string) => ({ toolCalls: [{ name: tool, args: { description, prompt } }] });
const toolText = (out: HarnessAppOutput, turn = 0): string =>
  out.turns[turn]!.toolResults.flatMap((result) => result.content.map((block) => block.text ?? '')).join('\n');

function childHeaders(daemon: DaemonProcess): Array<{ id: string; parentSession?: string; delegationDepth: number; createdAt: string; provider: string }> {
  const dir = join(daemon.stateDir, 'sessions');
  return readdirSync(dir).map((file) => JSON.parse(readFileSync(join(dir, file), 'utf8').split('\n')[0]!));
}

function lastEventAt(daemon: DaemonProcess, sessionId: string): string {
  const lines = readFileSync(join(daemon.stateDir, 'sessions', `${sessionId}.jsonl`), 'utf8').trim().split('\n');
  return (JSON.parse(lines.at(-1)!) as { at: string }).at;
}

describe('deepseek-harness through subagentd/harness (scripted children)', () => {
  let daemon: DaemonProcess;
  beforeAll(async () => {
    daemon = await startE2eDaemon({ detachGraceMs: 0, limits: { maxConcurrentRuns: 1 } });
  });
  afterAll(async () => daemon?.stop());

  it('spawn: the harness tool delegates to the pool, and the daemon records depth and lineage', async () => {
    const out = await runHarnessApp(appDir, {
      socket: daemon.socket,
      sessionId: 'harness-parent-spawn',
      cwd: REPO,
      bridge: { agentOptions: { model: HELLO } },
      turns: [{ user: 'summarise the repo', steps: [delegate('subagent', 'summarise repo', 'Summarise this repository'), { text: 'done' }] }],
    });
    expect(out.providers).toEqual(expect.arrayContaining(['spawn', 'fork']));
    expect(out.turns[0]!.endReason).toBe('completed');
    expect(out.turns[0]!.toolResults[0]!.isError).toBe(false);
    expect(toolText(out)).toContain('This repository is subagentd');
    const header = childHeaders(daemon).find((h) => h.parentSession === 'harness-parent-spawn');
    expect(header).toMatchObject({ provider: 'spawn', delegationDepth: 1 });
  });

  it('a failing child: the harness tool reports the error with the daemon diagnostic', async () => {
    const failing = script('failing', [{ text: 'half', error: { kind: 'http', message: 'upstream exploded E500-HARNESS', status: 500 } }]);
    const out = await runHarnessApp(appDir, {
      socket: daemon.socket,
      bridge: { agentOptions: { model: failing } },
      turns: [{ user: 'try', steps: [delegate('subagent', 'doomed task', 'do it'), { text: 'noted' }] }],
    });
    const result = out.turns[0]!.toolResults[0]!;
    expect(result.isError).toBe(true);
    const text = toolText(out);
    expect(text).toMatch(/Diagnostic: .*E500-HARNESS/);
    expect(text).toContain('Partial output before the run ended:\nhalf');
  });

  it("cancelling the parent's turn cancels the tool call, and the daemon's run ends aborted", async () => {
    const slow = script('slow', [{ text: 'never', delayMs: 60_000 }]);
    const out = await runHarnessApp(appDir, {
      socket: daemon.socket,
      bridge: { agentOptions: { model: slow } },
      turns: [{ user: 'start', steps: [delegate('subagent', 'slow task', 'take forever'), { text: 'unreached' }], cancelOnChildStart: true }],
    });
    // No model request follows a cancelled turn: read the tool result from the parent's own log.
    const toolResult = out.parentLog.find((event) => (event as { type: string }).type === 'tool/result');
    expect(JSON.stringify(toolResult)).toContain('subagent run was cancelled');
    const runId = out.childStarts[0]!.id;
    const client = await connect({ socket: daemon.socket });
    try {
      const run = (await client.ops.runs()).find((info) => info.runId === runId);
      expect(run).toMatchObject({ stopReason: 'aborted' });
    } finally {
      await client.close();
    }
  });

  it('two harness processes share one pool: the concurrency cap holds and neither can touch the other', async () => {
    const steady = script('steady', [{ text: 'steady answer', delayMs: 300 }]);
    const scenario = (sessionId: string) => ({
      socket: daemon.socket,
      sessionId,
      bridge: { agentOptions: { model: steady } },
      turns: [{ user: 'go', steps: [delegate('subagent', 'steady task', 'answer'), { text: 'ok' }] }],
    });
    const [a, b] = await Promise.all([runHarnessApp(appDir, scenario('harness-a')), runHarnessApp(appDir, scenario('harness-b'))]);
    expect(toolText(a)).toContain('steady answer');
    expect(toolText(b)).toContain('steady answer');
    // maxConcurrentRuns is 1: the two children's lives (publication to last event) never overlap.
    const [first, second] = ['harness-a', 'harness-b']
      .map((parent) => childHeaders(daemon).find((h) => h.parentSession === parent)!)
      .map((h) => ({ from: h.createdAt, to: lastEventAt(daemon, h.id) }))
      .sort((x, y) => x.from.localeCompare(y.from));
    expect(second!.from >= first!.to).toBe(true);
    // Another connection (as either harness is to the other) sees A's run as not its own, cannot
    // read its session, and cannot take it over without its token.
    const outsider = await connect({ socket: daemon.socket });
    try {
      const runId = a.childStarts[0]!.id;
      expect((await outsider.ops.runs()).find((info) => info.runId === runId)).toMatchObject({ mine: false });
      const inspected = await outsider.ops.inspect(runId);
      expect(inspected.events).toBeUndefined();
      const error = await rejection(outsider.ops.attach(runId, 'forged-token'));
      expect(error).toMatchObject({ code: 'NOT_OWNER' });
    } finally {
      await outsider.close();
    }
  });
});

describe('fork from a real harness agent (children on the chat-completions server)', () => {
  let server: ModelServer;
  let daemon: DaemonProcess;
  beforeAll(async () => {
    server = await ModelServer.start();
    daemon = await startE2eDaemon(
      { detachGraceMs: 0, model: { baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', default: 'test-model', maxRetries: 0 } },
      { TEST_KEY: 'sk-harness-lane' },
    );
  });
  afterAll(async () => {
    await daemon?.stop();
    await server?.close();
  });

  it("the forked child's model sees the parent's completed turn, translated from the harness log", async () => {
    await server.beginTest();
    server.enqueue(textResponse(['the code word was PLUM-7']));
    const out = await runHarnessApp(appDir, {
      socket: daemon.socket,
      sessionId: 'harness-parent-fork',
      tools: [{ provider: 'fork', toolName: 'subagent_fork' }],
      turns: [
        { user: 'Remember the code word PLUM-7.', steps: [{ text: 'Noted: PLUM-7.' }] },
        { user: 'Ask a fork what the code word was.', steps: [delegate('subagent_fork', 'recall word', 'What was the code word?'), { text: 'done' }] },
      ],
    });
    expect(toolText(out, 1)).toContain('the code word was PLUM-7');
    const sent = server.messages(0).map((message) => `${message.role}: ${contentText(message)}`).join('\n');
    expect(sent).toContain('user: Remember the code word PLUM-7.');
    expect(sent).toContain('assistant: Noted: PLUM-7.');
    expect(sent).not.toContain('Ask a fork'); // the in-flight turn is not part of the seed
    if (process.env['REFRESH_HARNESS_FIXTURE'] === '1') writeFileSync(FIXTURE, `${JSON.stringify(out.parentLog, null, 1)}\n`);
  });
});
