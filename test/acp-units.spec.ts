/**
 * The acp provider's small parts on their own: the stdout guard, stderr ring, bounded
 * diagnostics, permission policy, stop reasons, env, config and structured-output checks, and
 * how a turn tells messages apart. Its file access is tested in workspace-containment.spec.ts.
 */
import { mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { TRUNCATION_MARKER, capText, truncationNote, type RunEvent } from '../protocol/index.js';
import { ByteRing } from '../daemon/providers/acp/byte-ring.js';
import { buildChildEnv, resolveCommand } from '../daemon/providers/acp/child-env.js';
import { resolveAcpConfig } from '../daemon/providers/acp/config.js';
import { ConfigError, loadConfig } from '../daemon/config.js';
import { describeFailure } from '../daemon/providers/acp/diagnostic.js';
import { agentMessages, ProtocolViolation } from '../daemon/providers/acp/nd-json-stream.js';
import { allowOutcome, denyOutcome } from '../daemon/providers/acp/permission-policy.js';
import { mapStopReason } from '../daemon/providers/acp/stop-reason.js';
import { compileStructuredOutput } from '../daemon/providers/acp/structured-output.js';
import { Turn } from '../daemon/providers/acp/turn.js';

describe('agentMessages (the agent\'s stdout as messages)', () => {
  async function read(chunks: Array<string | Buffer>): Promise<{ messages: unknown[]; violation: ProtocolViolation | undefined; failed: boolean }> {
    let violation: ProtocolViolation | undefined;
    const stdout = new PassThrough();
    const messages: unknown[] = [];
    let failed = false;
    const reading = (async () => {
      try {
        for await (const message of agentMessages(stdout, (v) => (violation = v), 64)) messages.push(message);
      } catch {
        failed = true;
      }
    })();
    for (const chunk of chunks) {
      stdout.write(chunk);
      await new Promise((resolve) => setImmediate(resolve));
    }
    stdout.end();
    await reading;
    return { messages, violation, failed };
  }

  it('parses JSON object lines split anywhere (a character split across chunks too), skipping blank lines', async () => {
    const check = Buffer.from('{"t":"✓"}\n');
    const result = await read(['{"jsonrpc":"2.0",', '"id":1}\n\n  \r\n{"a"', ':2}\r\n', check.subarray(0, 7), check.subarray(7), '{"last":true}']);
    expect(result).toEqual({ messages: [{ jsonrpc: '2.0', id: 1 }, { a: 2 }, { t: '✓' }, { last: true }], violation: undefined, failed: false });
  });

  it('stops at a non-JSON line: nothing after it reaches the SDK', async () => {
    const result = await read(['{"ok":1}\n', 'hello world\n{"later":1}\n']);
    expect(result.failed).toBe(true);
    expect(result.messages).toEqual([{ ok: 1 }]);
    expect(result.violation?.message).toContain('"hello world"');
  });

  it('treats JSON that is not an object, a non-JSON unterminated last line, and an overlong line as violations', async () => {
    expect((await read(['[1,2]\n'])).violation).toBeDefined();
    expect((await read(['"a string"\n'])).violation).toBeDefined();
    expect((await read(['{"ok":1}\n', 'trailing'])).violation).toBeDefined();
    expect((await read(['{"x":"' + 'y'.repeat(100)])).violation?.message).toContain('longer than 64 bytes');
    expect((await read(['{"x":"' + 'y'.repeat(100) + '"}\n'])).violation?.message).toContain('longer than 64 bytes');
  });

  it('pauses stdout while the reader has not taken what was parsed', async () => {
    const stdout = new PassThrough();
    const messages = agentMessages(stdout, () => undefined);
    for (let i = 0; i < 100; i++) stdout.write(`{"n":${i}}\n`);
    await new Promise((resolve) => setImmediate(resolve));
    expect(stdout.isPaused()).toBe(true);
    const reader = messages.getReader();
    const got: unknown[] = [];
    const all = (async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read()) got.push(r.value);
    })();
    stdout.end();
    await all;
    expect(got).toHaveLength(100);
  });
});

describe('ByteRing and bounded diagnostics', () => {
  it('keeps the last bytes and cuts on a character boundary', () => {
    const ring = new ByteRing(8);
    ring.push(Buffer.from('abcdef'));
    ring.push(Buffer.from('ghij'));
    expect(ring.tail(100)).toBe('cdefghij');
    ring.push(Buffer.from('ééé')); // 6 bytes
    expect(ring.byteLength).toBe(8);
    expect(ring.tail(5)).toBe('éé'); // 5 bytes start mid-character: the half is dropped
    ring.push(Buffer.from('0123456789'));
    expect(ring.tail(8)).toBe('23456789');
  });

  it('caps a failure report at the 4 KiB diagnostic bound, visibly', () => {
    const long = 'é'.repeat(5000);
    const bounded = describeFailure('boom', undefined, long);
    expect(Buffer.byteLength(bounded)).toBeLessThanOrEqual(4096);
    expect(bounded.endsWith('…[truncated]')).toBe(true);
    expect(bounded).not.toContain('\uFFFD');
    expect(describeFailure('boom', 'agent exited with code 1', '')).toBe('boom; agent exited with code 1; stderr was empty');
  });
});

describe('permission policy', () => {
  const options = [
    { optionId: 'ra', name: 'Never', kind: 'reject_always' as const },
    { optionId: 'aa', name: 'Always', kind: 'allow_always' as const },
    { optionId: 'ro', name: 'No', kind: 'reject_once' as const },
    { optionId: 'ao', name: 'Yes', kind: 'allow_once' as const },
  ];

  it('prefers one-shot options and falls back sensibly', () => {
    expect(allowOutcome(options)).toEqual({ outcome: 'selected', optionId: 'ao' });
    expect(denyOutcome(options)).toEqual({ outcome: 'selected', optionId: 'ro' });
    expect(allowOutcome(options.filter((o) => o.kind !== 'allow_once'))).toEqual({ outcome: 'selected', optionId: 'aa' });
    expect(allowOutcome(options.filter((o) => o.kind.startsWith('reject')))).toEqual({ outcome: 'selected', optionId: 'ro' });
    expect(denyOutcome(options.filter((o) => o.kind.startsWith('allow')))).toEqual({ outcome: 'cancelled' });
    expect(denyOutcome([])).toEqual({ outcome: 'cancelled' });
  });
});

describe('stop reasons', () => {
  it('maps ACP reasons and treats the unknown as error', () => {
    expect(['end_turn', 'max_tokens', 'max_turn_requests', 'refusal', 'cancelled', 'exploded', ''].map(mapStopReason)).toEqual([
      'completed',
      'max-tokens',
      'error',
      'refusal',
      'aborted',
      'error',
      'error',
    ]);
  });
});

describe('child environment and command', () => {
  it('starts from PATH, HOME and LANG only, then config, then request', () => {
    const env = buildChildEnv(
      { PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', AWS_SECRET_ACCESS_KEY: 'x', DEEPSEEK_API_KEY: 'y' },
      { A: 'config', B: 'config' },
      { B: 'request' },
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', A: 'config', B: 'request' });
  });

  it('resolves bare names on absolute PATH entries only, and requires the execute bit', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'acp-bin-'));
    try {
      await writeFile(join(dir, 'agent'), '#!/bin/sh\n');
      await chmod(join(dir, 'agent'), 0o755);
      await writeFile(join(dir, 'plain'), '');
      expect(await resolveCommand('agent', `relative:${dir}`, '/')).toBe(join(dir, 'agent'));
      expect(await resolveCommand('agent', 'relative', dir)).toBeUndefined();
      expect(await resolveCommand('plain', dir, '/')).toBeUndefined();
      expect(await resolveCommand('./agent', undefined, dir)).toBe(join(dir, 'agent'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('config', () => {
  it('applies the documented defaults', () => {
    expect(resolveAcpConfig({ name: 'a', command: 'agent' })).toEqual({
      name: 'a',
      command: 'agent',
      args: [],
      env: {},
      cwd: undefined,
      permission: 'deny',
      fileAccess: { read: true, write: false },
      initializeTimeoutMs: 30_000,
      disposeGraceMs: { stdin: 6_000, term: 3_000, idleStdin: 200 },
      warm: 0,
      warmIdleMs: 600_000,
      reuseProcesses: false,
      maxProcesses: undefined,
    });
  });

  it('rejects values that would misbehave later', () => {
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', permission: 'maybe' as 'ask' })).toThrow(/permission/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', disposeGraceMs: { stdin: 2 ** 31, term: 0 } })).toThrow(/stdin/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', disposeGraceMs: { stdin: 0, term: 0, idleStdin: -1 } })).toThrow(/idleStdin/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', env: { A: 1 as unknown as string } })).toThrow(/env\.A/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', warm: 1.5 })).toThrow(/warm must be an integer/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', warm: 3, maxProcesses: 2 })).toThrow(/warm \(3\) cannot exceed maxProcesses \(2\)/);
    expect(() => resolveAcpConfig({ name: 'a', command: 'x', warmIdleMs: -1 })).toThrow(/warmIdleMs/);
  });

  it('reads a config file entry with the provider’s own schema: every policy, and no unknown field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'acp-config-'));
    try {
      const file = join(dir, 'config.json');
      const entry = { name: 'a', type: 'acp', command: 'agent', permission: 'allow-in-workspace' };
      await writeFile(file, JSON.stringify({ providers: [entry] }));
      expect(loadConfig(file).providers).toEqual([entry]);
      expect(resolveAcpConfig(loadConfig(file).providers![0]!).permission).toBe('allow-in-workspace');
      await writeFile(file, JSON.stringify({ providers: [{ ...entry, colour: 'red' }] }));
      expect(() => loadConfig(file)).toThrow(ConfigError);
      expect(() => loadConfig(file)).toThrow(/colour/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('structured output check', () => {
  const structured = compileStructuredOutput({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });

  it('accepts surrounding whitespace and a whole-message fence, nothing else', () => {
    expect(structured.check('  {"n": 1}\n')).toEqual({ ok: true, value: { n: 1 } });
    expect(structured.check('```\n{"n": 2}\n```')).toEqual({ ok: true, value: { n: 2 } });
    expect(structured.check('Here you go: {"n": 3}').ok).toBe(false);
    expect(structured.check('{"n": 1.5}')).toMatchObject({ ok: false, diagnostic: expect.stringContaining('/n must be integer') });
  });
});

describe('Turn', () => {
  const turnWith = (events: RunEvent[] = []): Turn => new Turn({ emit: (e) => events.push(e), structured: undefined, onCancel: () => {} });
  const chunk = (text: string, messageId?: string) => ({
    sessionUpdate: 'agent_message_chunk' as const,
    content: { type: 'text' as const, text },
    ...(messageId ? { messageId } : {}),
  });

  it('returns the last non-empty message, split by message id or a tool call', async () => {
    const turn = turnWith();
    turn.applyUpdate(chunk('first ', 'm1'));
    turn.applyUpdate(chunk('message', 'm1'));
    turn.applyUpdate(chunk('second', 'm2'));
    expect(turn.finalText()).toBe('second');
    turn.applyUpdate({ sessionUpdate: 'tool_call', toolCallId: 't', title: 'T' });
    turn.applyUpdate(chunk('   '));
    expect(turn.finalText()).toBe('second');
    turn.finish('end_turn');
    expect(await turn.result).toEqual({ output: [{ type: 'text', text: 'second' }], stopReason: 'completed' });
  });

  it('cuts its output to the cap itself, whole characters and the marker, and names the cut first in the diagnostic', async () => {
    const cap = 64;
    const turn = new Turn({ emit: () => undefined, structured: undefined, onCancel: () => {}, maxOutputBytes: cap });
    for (let i = 0; i < 10; i++) turn.applyUpdate(chunk('ü✓x'.repeat(4)));
    turn.fail('the agent went away');
    const result = await turn.result;
    const text = result.output[0]?.type === 'text' ? result.output[0].text : '';
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(cap);
    expect(text.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(text.startsWith('ü✓x')).toBe(true);
    expect(text).not.toContain('\ufffd');
    expect(result.diagnostic).toBe(`${truncationNote('output', cap)}; the agent went away`);
    // An answer within the cap is left as it is, with no note.
    const small = new Turn({ emit: () => undefined, structured: undefined, onCancel: () => {}, maxOutputBytes: cap });
    small.applyUpdate(chunk('short'));
    small.finish('end_turn');
    expect(await small.result).toEqual({ output: [{ type: 'text', text: 'short' }], stopReason: 'completed' });
  });

  it('cuts a many-chunk answer exactly as capText cuts the whole text (one-byte and multi-byte chunks, the cut inside a chunk or at its edge)', async () => {
    const cap = 1000;
    const cases: string[][] = [
      Array.from({ length: 40 }, (_, i) => `${i % 10}`.repeat(37)),
      Array.from({ length: 40 }, () => 'x'.repeat(50)),
      Array.from({ length: 40 }, (_, i) => (i === 7 ? 'ü✓😀x' : 'ab\n"c"').repeat(9)),
      ['y'.repeat(cap - Buffer.byteLength(TRUNCATION_MARKER)), 'z'.repeat(100)],
    ];
    for (const chunks of cases) {
      const turn = new Turn({ emit: () => undefined, structured: undefined, onCancel: () => {}, maxOutputBytes: cap });
      for (const text of chunks) turn.applyUpdate(chunk(text));
      const whole = turn.finalText();
      turn.finish('end_turn');
      const result = await turn.result;
      expect(result.output).toEqual([{ type: 'text', text: capText(whole, cap).text }]);
      expect(result.diagnostic).toBe(truncationNote('output', cap));
    }
  });

  it('settles once: a cancel wins over a later answer and silences later updates', async () => {
    const events: RunEvent[] = [];
    let cancels = 0;
    const turn = new Turn({ emit: (e) => events.push(e), structured: undefined, onCancel: () => cancels++ });
    turn.applyUpdate(chunk('partial'));
    turn.cancel();
    turn.cancel();
    turn.applyUpdate(chunk(' more'));
    turn.finish('end_turn');
    expect(await turn.result).toEqual({ output: [{ type: 'text', text: 'partial' }], stopReason: 'aborted' });
    expect(cancels).toBe(1);
    expect(turn.cancelSignal.aborted).toBe(true);
    expect(events).toEqual([{ kind: 'text-delta', text: 'partial' }]);
  });
});
