/**
 * A run's output, its event stream and its stored record are bounded (issue #10 item 8a): an ACP
 * agent floods 3 MiB of text into a daemon capped at 1 MiB. The answer and the stream each stop
 * at the cap with the protocol's one marker, the diagnostic names both cuts, and the run index
 * keeps at most its stored cap of the output, also marked. An in-process child whose model
 * streams 3 MiB in one step is cut the same way, and its step holds no more than the cap.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  DEFAULT_MAX_STORED_OUTPUT_BYTES,
  TRUNCATION_MARKER,
  truncationNote,
  type RunEvent,
} from '../protocol/index.js';
import type { DaemonProcess } from './support/daemon-process.js';
import { RAW_AGENT } from './fixtures/acp-harness.js';
import { chunk, startChatCompletionsServer } from './support/chat-completions-server.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';

const CAP = 1024 * 1024;
const FLOOD = 3 * 1024 * 1024;
let daemon: DaemonProcess;
const clients = new ClientPool();

beforeAll(async () => {
  daemon = await startE2eDaemon({
    limits: { maxOutputBytes: CAP },
    providers: [
      { type: 'acp', name: 'flood', command: process.execPath, args: [RAW_AGENT], env: { RAW_FLOOD_BYTES: String(FLOOD) }, disposeGraceMs: { stdin: 2000, term: 1000 } },
    ],
  });
});

afterAll(async () => {
  await clients.closeAll();
  await daemon?.stop();
});

it('caps the output and the event stream with one marker, names both cuts, and caps the stored record', { timeout: 30_000 }, async () => {
  const service = await clients.connect(daemon.socket);
  const events: RunEvent[] = [];
  const run = await service.start('flood', {
    prompt: [{ type: 'text', text: 'flood' }],
    signal: new AbortController().signal,
    parent: { sessionId: 'p', cwd: daemon.dir },
    onEvent: (event) => events.push(event),
  });
  const result = await run.result;
  expect(result.stopReason).toBe('completed');
  expect(result.output).toHaveLength(1);
  const text = result.output[0]?.type === 'text' ? result.output[0].text : '';
  expect(Buffer.byteLength(text)).toBeLessThanOrEqual(CAP);
  expect(Buffer.byteLength(text)).toBeGreaterThan(CAP - 64);
  expect(text.endsWith(TRUNCATION_MARKER)).toBe(true);
  expect(result.diagnostic).toBe(`${truncationNote('output', CAP)}; ${truncationNote('event stream', CAP)}`);

  const deltas = events.filter((e): e is Extract<RunEvent, { kind: 'text-delta' }> => e.kind === 'text-delta');
  expect(deltas.at(-1)?.text).toBe(TRUNCATION_MARKER);
  expect(deltas.filter((d) => d.text === TRUNCATION_MARKER)).toHaveLength(1);
  const streamed = deltas.slice(0, -1).reduce((sum, d) => sum + Buffer.byteLength(d.text), 0);
  expect(streamed).toBeLessThanOrEqual(CAP);
  await run.dispose();

  // The record on disk: one line per change (the whole record, then changes), the settled one capped at the stored cap.
  const lines = readFileSync(join(daemon.stateDir, 'runs.jsonl'), 'utf8').trim().split('\n');
  const mine = lines.filter((line) => line.includes(run.id));
  expect(mine.length).toBeGreaterThan(0);
  for (const line of mine) expect(Buffer.byteLength(line)).toBeLessThan(DEFAULT_MAX_STORED_OUTPUT_BYTES + 4096);
  type Stored = { result?: { output: Array<{ text: string }>; diagnostic: string } };
  const settled = mine.map((line) => JSON.parse(line) as Stored & { change?: Stored }).map((r) => r.change ?? r).find((r) => r.result);
  expect(settled?.result?.output[0]?.text.endsWith(TRUNCATION_MARKER)).toBe(true);
  expect(settled?.result?.diagnostic).toContain(truncationNote('stored output', DEFAULT_MAX_STORED_OUTPUT_BYTES));
});

it('an in-process child: the model step holds at most the cap (one chunk over), and the result is cut the same way', { timeout: 30_000 }, async () => {
  const server = await startChatCompletionsServer();
  const PIECE = 'y'.repeat(64 * 1024);
  server.enqueue({
    type: 'stream',
    steps: [
      { data: chunk({ role: 'assistant', content: '' }) },
      ...Array.from({ length: FLOOD / PIECE.length }, () => ({ data: chunk({ content: PIECE }) })),
      { data: chunk({ content: '' }, { finish_reason: 'stop' }) },
      { done: true },
    ],
  });
  const model = { baseUrl: server.baseUrl, apiKeyEnv: 'CAP_TEST_KEY', default: 'test-model', maxRetries: 0 };
  const inProcess = await startE2eDaemon({ limits: { maxOutputBytes: CAP }, model }, { CAP_TEST_KEY: 'k' });
  try {
    const service = await clients.connect(inProcess.socket);
    const run = await service.start('spawn', {
      prompt: [{ type: 'text', text: 'flood' }],
      signal: new AbortController().signal,
      parent: { sessionId: 'p', cwd: inProcess.dir },
    });
    const result = await run.result;
    const text = result.output[0]?.type === 'text' ? result.output[0].text : '';
    expect(result.stopReason).toBe('completed');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(CAP);
    expect(text.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(result.diagnostic).toBe(truncationNote('output', CAP));
    // The session log's assistant message: the adapter stopped holding text one chunk past the cap.
    const inspected = await service.ops.inspect(run.id);
    const said = inspected.events?.find((e) => e.type === 'assistant/message');
    const held = said?.type === 'assistant/message' && said.content[0]?.type === 'text' ? said.content[0].text.length : -1;
    expect(held).toBeGreaterThan(CAP);
    expect(held).toBeLessThanOrEqual(CAP + PIECE.length + 1);
    await run.dispose();
  } finally {
    await inProcess.stop();
    await server.close();
  }
});
