/**
 * The rules both sides share from protocol/ and common/: each is checked here once, against
 * real files and real processes where it has any, so a change to the one home shows at once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  PROTOCOL_VERSION,
  SubagentError,
  assertCapabilities,
  declaredLength,
  encodeFrame,
  endEventOf,
  minorOf,
  speaksOurMajor,
} from '../protocol/index.js';
import { pollWithin, within } from '../common/bounded-wait.js';
import { climbKillLadder } from '../common/kill-ladder.js';
import { createToken, readTokenFile, tokenPathFor, tokensEqual, writeTokenFile } from '../common/daemon-token.js';
import { packageRoot, packageVersion } from '../common/package-info.js';
import { FrameSplitter } from '../common/frame-splitter.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const step of cleanups.splice(0).reverse()) step();
});

describe('framing (protocol/framing.ts)', () => {
  it('reads the length the writer wrote, through the shared splitter, split at any byte', () => {
    const messages = [{ jsonrpc: '2.0', id: 1, method: 'initialize', params: { text: 'héllo ✓' } }, { jsonrpc: '2.0', method: 'x' }];
    const bytes = Buffer.concat(messages.map((m) => encodeFrame(m)));
    for (const step of [1, 7, bytes.length]) {
      const bodies: unknown[] = [];
      const splitter = new FrameSplitter({ maxFrameBytes: 1024, maxHeaderBytes: 64 }, (b, s, e) => bodies.push(JSON.parse(b.toString('utf8', s, e))), (problem) => {
        throw new Error(problem);
      });
      for (let i = 0; i < bytes.length; i += step) splitter.push(bytes.subarray(i, i + step));
      expect(bodies).toEqual(messages);
      expect(splitter.rest().length).toBe(0);
    }
  });

  it('takes any header lines but needs one valid Content-Length', () => {
    expect(declaredLength('content-length: 12\r\nContent-Type: application/vscode-jsonrpc')).toBe(12);
    expect(declaredLength('Content-Type: x')).toEqual({ problem: 'frame without Content-Length' });
    expect(declaredLength('Content-Length: lots')).toEqual({ problem: 'invalid Content-Length "lots"' });
    expect(declaredLength('no header at all')).toEqual({ problem: 'malformed header line "no header at all"' });
  });
});

describe('seam rules (protocol/)', () => {
  it('checks capabilities in the seam order: the first missing one fails, naming its field', () => {
    const provider = { name: 'p', capabilities: { outputSchema: false, depthLimit: true, toolFilter: false, persona: false } };
    const error = (() => {
      try {
        assertCapabilities(provider, { persona: 'x', toolFilter: { allow: [] }, outputSchema: { type: 'object' } });
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(SubagentError);
    expect(error).toMatchObject({ code: 'UNSUPPORTED_CAPABILITY', data: { field: '/outputSchema' } });
    expect(() => assertCapabilities(provider, { maxDepth: 2 })).not.toThrow();
  });

  it('builds the end event from a result: output only when there is some, usage only when counted', () => {
    const identity = { runId: 'r', provider: 'p', id: 'c', local: false };
    const usage = { promptTokens: 1, completionTokens: 2, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 };
    expect(endEventOf(identity, { output: [], stopReason: 'aborted' })).toEqual({ ...identity, stopReason: 'aborted' });
    const output = [{ type: 'text' as const, text: 'done' }];
    expect(endEventOf(identity, { output, stopReason: 'completed', usage, diagnostic: 'not on the event' })).toEqual({
      ...identity,
      stopReason: 'completed',
      lastAssistantMessage: output,
      usage,
    });
  });

  it('accepts a peer of the same major protocol version only', () => {
    const [major] = PROTOCOL_VERSION.split('.');
    expect(speaksOurMajor(`${major}.99.3`)).toBe(true);
    expect(speaksOurMajor(`${Number(major) + 1}.0.0`)).toBe(false);
    expect(minorOf('1.1.0')).toBe(1);
    expect(minorOf('1.0.3')).toBe(0);
  });
});

describe('the daemon token file (common/daemon-token.ts)', () => {
  it('is written 0600 beside the socket, read back trimmed, and compared exactly', () => {
    const dir = mkdtempSync(join(tmpdir(), 'subagentd-token-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = tokenPathFor(join(dir, 'daemon.sock'));
    expect(path).toBe(join(dir, 'daemon.sock.token'));
    expect(readTokenFile(path)).toBeUndefined();
    const token = createToken();
    writeTokenFile(path, token);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readTokenFile(path)).toBe(token);
    expect(tokensEqual(token, token)).toBe(true);
    expect(tokensEqual(`${token}x`, token)).toBe(false);
    expect(tokensEqual(undefined, token)).toBe(false);
  });
});

describe('bounded waits and the kill ladder (common/)', () => {
  /** A real node child, once it is ready (its handlers installed): it says so on stdout. */
  async function child(setup: string): Promise<{ process: ChildProcess; exited: Promise<unknown> }> {
    const started = spawn(process.execPath, ['-e', `${setup}; setInterval(() => {}, 1000); process.stdout.write('ready')`], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    const exited = once(started, 'exit');
    cleanups.push(() => started.kill('SIGKILL'));
    await once(started.stdout!, 'data');
    return { process: started, exited };
  }

  /** The rung meant to work gets a generous bound (it returns as soon as the child is gone); the others a short one. */
  const ladder = (target: ChildProcess, heeded: 'stdin' | 'SIGTERM' | 'SIGKILL') =>
    (['stdin', 'SIGTERM', 'SIGKILL'] as const).map((step) => ({
      step,
      act: () => (step === 'stdin' ? target.stdin?.end() : target.kill(step)),
      waitMs: step === heeded ? 10_000 : 300,
    }));

  it('stops at the first rung the process heeds', async () => {
    const polite = await child(`process.stdin.resume(); process.stdin.on('end', () => process.exit(0))`);
    expect(await climbKillLadder(ladder(polite.process, 'stdin'), (ms) => within(polite.exited, ms))).toBe('stdin');

    const deaf = await child('');
    expect(await climbKillLadder(ladder(deaf.process, 'SIGTERM'), (ms) => within(deaf.exited, ms))).toBe('SIGTERM');

    const stubborn = await child(`process.on('SIGTERM', () => {})`);
    expect(await climbKillLadder(ladder(stubborn.process, 'SIGKILL'), (ms) => within(stubborn.exited, ms))).toBe('SIGKILL');
  });

  it('says so when the process outlives every rung', async () => {
    const acted: string[] = [];
    const endedBy = await climbKillLadder(
      [
        { step: 'SIGTERM', act: () => acted.push('SIGTERM'), waitMs: 10 },
        { step: 'SIGKILL', act: () => acted.push('SIGKILL'), waitMs: 10 },
      ],
      (ms) => pollWithin(() => false, ms),
    );
    expect(endedBy).toBeUndefined();
    expect(acted).toEqual(['SIGTERM', 'SIGKILL']);
  });

  it('within: true once settled (a rejection too), false when the bound passes first', async () => {
    expect(await within(Promise.resolve(), 1_000)).toBe(true);
    expect(await within(Promise.reject(new Error('x')), 1_000)).toBe(true);
    expect(await within(new Promise(() => undefined), 20)).toBe(false);
    expect(await within(Promise.resolve(), 0)).toBe(false);
  });

  it('pollWithin: true as soon as the check holds, false when it never does', async () => {
    let looks = 0;
    expect(await pollWithin(() => ++looks === 3, 10_000)).toBe(true);
    expect(looks).toBe(3);
    expect(await pollWithin(() => false, 30)).toBe(false);
  });
});

describe('the package (common/package-info.ts)', () => {
  it('reports the version in package.json at the package root', () => {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { name: string; version: string };
    expect(pkg.name).toBe('subagentd');
    expect(packageVersion()).toBe(pkg.version);
  });
});
