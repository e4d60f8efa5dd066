/**
 * What a real ACP agent may ask of the provider: permission (by policy or by asking the owning
 * client), files rooted at the parent's cwd, and methods we do not implement — each answered,
 * none left hanging.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DaemonRun } from '../daemon/provider.js';
import type { AcpProviderConfig } from '../daemon/providers/acp/index.js';
import type { PermissionResult } from '../protocol/index.js';
import {
  fakeHost,
  provider,
  readRecord,
  request,
  sdkAgentConfig,
  textOf,
  waitFor,
  type AskHandler,
  type FakeHost,
  workspacePerTest,
} from './fixtures/acp-harness.js';

const ws = workspacePerTest();

/** Several turns on one agent (a resume chain), so a batch of attempts costs one process. */
async function turns(mode: string, prompts: readonly string[], extra: Partial<AcpProviderConfig> = {}): Promise<string[]> {
  const replies: string[] = [];
  let run: DaemonRun | undefined;
  try {
    for (const prompt of prompts) {
      const content = [{ type: 'text' as const, text: prompt }];
      run = run?.resume ? await run.resume(content) : await provider(sdkAgentConfig(ws, mode, extra)).start(request(ws, fakeHost(), { prompt: content }));
      const result = await run.result;
      expect(result.stopReason).toBe('completed');
      replies.push(textOf(result.output));
    }
  } finally {
    await run?.dispose();
  }
  return replies;
}

/** One whole turn with `prompt`; returns the final text. */
async function turn(mode: string, prompt: string, extra: Partial<AcpProviderConfig> = {}, host: FakeHost = fakeHost()): Promise<string> {
  const run = await provider(sdkAgentConfig(ws, mode, extra)).start(request(ws, host, { prompt: [{ type: 'text', text: prompt }] }));
  const result = await run.result;
  await run.dispose();
  expect(result.stopReason).toBe('completed');
  return textOf(result.output);
}

describe('session/request_permission', () => {
  it("policy 'allow' picks the one-shot allow option whatever its position", async () => {
    expect(await turn('permission', 'go', { permission: 'allow' })).toBe('permission: yes');
  });

  it("policy 'deny' picks the one-shot reject option, and is the default", async () => {
    expect(await turn('permission', 'go', { permission: 'deny' })).toBe('permission: no');
    expect(await turn('permission', 'go')).toBe('permission: no');
  });

  it("policy 'ask' relays the agent's question and the client's answer", async () => {
    const host = fakeHost(async () => ({ outcome: 'selected', optionId: 'yes-always' }));
    expect(await turn('permission', 'go', { permission: 'ask' }, host)).toBe('permission: yes-always');
    expect(host.asks).toEqual([
      {
        title: 'Edit config.json',
        options: [
          { optionId: 'no-never', name: 'Never', kind: 'reject_always' },
          { optionId: 'yes-always', name: 'Always', kind: 'allow_always' },
          { optionId: 'no', name: 'No', kind: 'reject_once' },
          { optionId: 'yes', name: 'Yes', kind: 'allow_once' },
        ],
      },
    ]);
  });

  it("policy 'ask' denies when the client names an option the agent did not offer or fails", async () => {
    const invented = fakeHost(async () => ({ outcome: 'selected', optionId: 'root-access' }));
    expect(await turn('permission', 'go', { permission: 'ask' }, invented)).toBe('permission: no');
    const failing = fakeHost(async () => {
      throw new Error('owner went away');
    });
    expect(await turn('permission', 'go', { permission: 'ask' }, failing)).toBe('permission: no');
  });

  it('answers an outstanding question `cancelled` when the run is cancelled', async () => {
    // The client never answers: only the cancel can end the wait.
    const never: AskHandler = () => new Promise<PermissionResult>(() => {});
    const host = fakeHost(never);
    const controller = new AbortController();
    const run = await provider(sdkAgentConfig(ws, 'permission', { permission: 'ask' })).start(
      request(ws, host, { signal: controller.signal }),
    );
    await waitFor(() => host.asks.length === 1, 5_000, 'the permission question');
    controller.abort();
    expect((await run.result).stopReason).toBe('aborted');
    expect(host.askSignals[0]?.aborted).toBe(true);
    const answered = await waitFor(
      () => readRecord(ws.recordPath).find((e) => e.event === 'permission'),
      5_000,
      'the agent to receive its answer',
    );
    expect(answered['outcome']).toEqual({ outcome: 'cancelled' });
    await run.dispose();
  });
});

describe('fs/read_text_file', () => {
  it('serves files inside the parent cwd, including through symlinks that stay inside', async () => {
    await mkdir(join(ws.root, 'docs'));
    await writeFile(join(ws.root, 'docs', 'notes.txt'), 'line one\nline two');
    await symlink(join(ws.root, 'docs', 'notes.txt'), join(ws.root, 'alias.txt'));
    expect(await turns('read', [join(ws.root, 'docs', 'notes.txt'), join(ws.root, 'alias.txt')])).toEqual([
      'read: line one\nline two',
      'read: line one\nline two',
    ]);
  });

  it('refuses paths outside the root: direct, via .., via a symlink, and relative ones', async () => {
    const secret = join(ws.outside, 'secret.txt');
    await writeFile(secret, 'do not leak');
    await symlink(secret, join(ws.root, 'innocent.txt'));
    await symlink(ws.outside, join(ws.root, 'linked-dir'));
    const attempts = [
      secret,
      join(ws.root, '..', basename(ws.outside), 'secret.txt'),
      join(ws.root, 'innocent.txt'),
      join(ws.root, 'linked-dir', 'secret.txt'),
    ];
    const replies = await turns('read', [...attempts, 'secret.txt']);
    for (const reply of replies.slice(0, attempts.length)) {
      expect(reply).toMatch(/^read-error -32602 .*outside the workspace/);
      expect(reply).not.toContain('do not leak');
    }
    expect(replies[attempts.length]).toMatch(/^read-error -32602 .*must be absolute/);
  });

  it('answers a missing file with resource-not-found', async () => {
    expect(await turn('read', join(ws.root, 'missing.txt'))).toMatch(/^read-error -32002 /);
  });

  it('is method-not-found, and not advertised, when read access is off', async () => {
    await writeFile(join(ws.root, 'notes.txt'), 'hidden');
    const reply = await turn('read', join(ws.root, 'notes.txt'), { fileAccess: { read: false, write: false } });
    expect(reply).toMatch(/^read-error -32601 /);
    const init = readRecord(ws.recordPath).find((e) => e.event === 'initialize');
    expect(init?.['params']).toMatchObject({ clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } } });
  });
});

describe('fs/write_text_file', () => {
  it('is method-not-found by default and writes nothing', async () => {
    const target = join(ws.root, 'out.txt');
    expect(await turn('write', `${target}\nhello`)).toMatch(/^write-error -32601 /);
    expect(existsSync(target)).toBe(false);
  });

  it('writes inside the root when enabled, creating missing directories', async () => {
    const access = { fileAccess: { read: true, write: true } };
    const target = join(ws.root, 'new', 'dir', 'out.txt');
    expect(await turn('write', `${target}\nhello\nworld`, access)).toBe('wrote');
    expect(readFileSync(target, 'utf8')).toBe('hello\nworld');
    // Overwrite truncates: no tail of the longer old content survives.
    expect(await turn('write', `${target}\nshorter`, access)).toBe('wrote');
    expect(readFileSync(target, 'utf8')).toBe('shorter');
  });

  it('refuses writes that would land outside the root', async () => {
    const access = { fileAccess: { read: true, write: true } };
    await symlink(ws.outside, join(ws.root, 'linked-dir'));
    const victim = join(ws.outside, 'victim.txt');
    await writeFile(victim, 'original');
    await symlink(victim, join(ws.root, 'victim-link.txt'));
    const attempts = [
      join(ws.outside, 'created.txt'),
      join(ws.root, 'linked-dir', 'created.txt'),
      join(ws.root, 'linked-dir', 'deeper', 'created.txt'),
      join(ws.root, 'victim-link.txt'),
    ];
    const replies = await turns('write', attempts.map((path) => `${path}\npwned`), access);
    expect(replies).toHaveLength(attempts.length);
    for (const reply of replies) expect(reply).toMatch(/^write-error -32602 .*outside the workspace/);
    expect(readFileSync(victim, 'utf8')).toBe('original');
    expect(existsSync(join(ws.outside, 'created.txt'))).toBe(false);
    expect(existsSync(join(ws.outside, 'deeper'))).toBe(false);
  });
});

describe('methods the provider does not implement', () => {
  it('answers terminal/* and unknown methods with method-not-found instead of hanging', async () => {
    expect(await turn('unsupported', 'go')).toBe('terminal/create -32601; x/unknown_method -32601');
  });
});
