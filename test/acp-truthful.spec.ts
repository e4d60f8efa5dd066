/**
 * What an ACP run reports must be true (issues #10 item 10, #15 item 5): a malformed answer from
 * the agent is a failure that names the method and field, never a false `completed`; the
 * agent's JSON-RPC `error.data` reaches the diagnostic; every refusal of the agent (by policy,
 * by the client, by the workspace) is listed in the diagnostic; `allow-in-workspace` approves file
 * work inside the workspace and refuses a shell; a config cwd that is no directory fails at load.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AcpProviderConfig } from '../daemon/providers/acp/index.js';
import { resolveAcpConfig } from '../daemon/providers/acp/config.js';
import { rejection } from './support/assertions.js';
import {
  RAW_AGENT,
  fakeHost,
  processGone,
  provider,
  readRecord,
  recordedPids,
  request,
  textOf,
  workspacePerTest,
} from './fixtures/acp-harness.js';

const ws = workspacePerTest();

function raw(extra: Partial<AcpProviderConfig> = {}, env: Record<string, string> = {}): AcpProviderConfig {
  return {
    name: 'acp-raw',
    command: process.execPath,
    args: [RAW_AGENT],
    permission: 'allow',
    initializeTimeoutMs: 10_000,
    disposeGraceMs: { stdin: 2_000, term: 1_000 },
    ...extra,
    env: { ACP_FIXTURE_RECORD: ws.recordPath, ...env },
  };
}

const choices = (): unknown[] => readRecord(ws.recordPath).filter((e) => e.event === 'permission').map((e) => e['choice']);

describe('malformed answers from the agent', { timeout: 20_000 }, () => {
  it.each([
    ['init-no-version', /failed during initialize: the answer to initialize has no valid protocolVersion/],
    ['new-no-session', /failed during session\/new: the answer to session\/new has no sessionId/],
  ])('%s fails the start with START_FAILED, and the agent is reaped', async (broken, why) => {
    const error = await rejection(provider(raw({}, { RAW_BREAK: broken })).start(request(ws, fakeHost())));
    expect(error.code).toBe('START_FAILED');
    expect(error.message).toMatch(why);
    expect(recordedPids(ws.recordPath).every(processGone)).toBe(true);
  });

  it('a session/prompt answer without stopReason is an error result, not completed', async () => {
    const run = await provider(raw({}, { RAW_BREAK: 'prompt-no-stop' })).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/answered session\/prompt malformed: the answer to session\/prompt has no stopReason/);
    expect(textOf(result.output)).toBe('permission ok');
    await run.dispose();
  });

  it("keeps the agent's error.data in the diagnostic", async () => {
    const run = await provider(raw({}, { RAW_BREAK: 'prompt-error-data' })).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('Internal error (JSON-RPC error -32603; data: {"details":"quota exhausted for model qwen-max"})');
    await run.dispose();
  });
});

describe('refusals are reported', { timeout: 20_000 }, () => {
  it("permission 'deny': completed, with a diagnostic that lists the refusal", async () => {
    const run = await provider(raw({ permission: 'deny' })).start(request(ws, fakeHost()));
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(result.diagnostic).toBe(`the agent was refused 1 request: "Touch file" refused by permission 'deny'`);
    expect(choices()).toEqual(['nope']);
    await run.dispose();
  });

  it("a client that rejects under 'ask' is listed too", async () => {
    const host = fakeHost(() => Promise.resolve({ outcome: 'selected', optionId: 'nope' }));
    const run = await provider(raw({ permission: 'ask' })).start(request(ws, host));
    expect((await run.result).diagnostic).toBe('the agent was refused 1 request: "Touch file" not approved by the client');
    await run.dispose();
  });

  it("'allow' approves a shell command; 'allow-in-workspace' refuses it and says why", async () => {
    const shell = { RAW_TOOL_KIND: 'execute' };
    const allowed = await provider(raw({ permission: 'allow' }, shell)).start(request(ws, fakeHost()));
    expect((await allowed.result).diagnostic).toBeUndefined();
    await allowed.dispose();
    const confined = await provider(raw({ permission: 'allow-in-workspace' }, shell)).start(request(ws, fakeHost()));
    const result = await confined.result;
    expect(result.diagnostic).toBe(
      `the agent was refused 1 request: "Touch file" (execute) refused by permission 'allow-in-workspace': a "execute" tool call cannot be confined to the workspace`,
    );
    await confined.dispose();
    expect(choices()).toEqual(['ok', 'nope']);
  });

  it("'allow-in-workspace' approves an edit inside the workspace, refuses one outside or through a symlink out", async () => {
    mkdirSync(join(ws.root, 'src'));
    const { symlinkSync } = await import('node:fs');
    symlinkSync(ws.outside, join(ws.root, 'link-out'));
    const cases: Array<[string, string]> = [
      [join(ws.root, 'src', 'new-file.ts'), 'ok'],
      [join(ws.outside, 'x.ts'), 'nope'],
      [join(ws.root, 'link-out', 'x.ts'), 'nope'],
      [join(ws.root, '..', 'escape.ts'), 'nope'],
    ];
    for (const [path] of cases) {
      const run = await provider(raw({ permission: 'allow-in-workspace' }, { RAW_TOOL_KIND: 'edit', RAW_TOOL_PATH: path })).start(
        request(ws, fakeHost()),
      );
      const result = await run.result;
      expect(result.stopReason).toBe('completed');
      await run.dispose();
    }
    expect(choices()).toEqual(cases.map(([, choice]) => choice));
  });
});

describe('config checked at load', () => {
  it('a cwd that is not an existing directory is refused when the config is resolved', () => {
    const file = join(ws.outside, 'a-file');
    writeFileSync(file, 'x');
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', cwd: file })).toThrow(`acp provider "a": cwd ${file} is not an existing directory`);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', cwd: join(ws.outside, 'missing') })).toThrow(/is not an existing directory/);
    expect(resolveAcpConfig({ name: 'a', command: 'x', cwd: ws.outside }).cwd).toBe(ws.outside);
  });

  it('the default handshake bound is 30 s and the policy list includes allow-in-workspace', () => {
    expect(resolveAcpConfig({ name: 'a', command: 'x' }).initializeTimeoutMs).toBe(30_000);
    expect(resolveAcpConfig({ name: 'a', command: 'x', permission: 'allow-in-workspace' }).permission).toBe('allow-in-workspace');
  });
});
