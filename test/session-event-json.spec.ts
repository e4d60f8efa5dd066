/**
 * One serialisation per streamed session event (daemon/store/session-event-json.ts): the session
 * log's line, the stream budget's measure and the `run/events` batch's event are one
 * `JSON.stringify` of the stored event, and the batch carries exactly the line the file holds.
 */
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RunEventsNotification, TRUNCATION_MARKER, type RunEvent, type SessionEvent } from '../protocol/index.js';
import { RunEventBatch } from '../daemon/connection/event-batch.js';
import { StreamBudget } from '../daemon/service/output-budget.js';
import { SessionLog } from '../daemon/store/session-log.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const header = { id: 's1', parentSession: 'p', cwd: '/work', delegationDepth: 1, provider: 'spawn', model: 'm', createdAt: '2026-01-01T00:00:00.000Z' };

afterEach(() => vi.restoreAllMocks());

/** A batch that keeps what it sends, unflushed until asked. */
function keptBatch(): { batch: RunEventBatch; sent: string[] } {
  const sent: string[] = [];
  return { batch: new RunEventBatch((json) => sent.push(json)), sent };
}

describe('one JSON per session event', () => {
  it('is made once by the session log and reused by the budget and the batch, which sends the line the file holds', async () => {
    const log = await SessionLog.create(await tempDir(), header);
    const stringify = vi.spyOn(JSON, 'stringify');
    const stored = log.append({ type: 'assistant/message', content: [{ type: 'text', text: 'héllo "quoted"' }], toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"a"}' }] });
    const event: RunEvent = { kind: 'session', event: stored };
    const admitted = new StreamBudget(1 << 20).admit(event);
    const { batch, sent } = keptBatch();
    batch.add('run_1', admitted!);
    batch.flush();
    expect(stringify.mock.calls.filter(([value]) => value === stored || value === event)).toHaveLength(1);
    stringify.mockRestore();

    await log.close();
    const line = (await readFile(log.path, 'utf8')).trim().split('\n')[1]!;
    expect(sent[0]).toContain(`{"kind":"session","event":${line}}`);
    const params = (JSON.parse(sent[0]!) as { params: unknown }).params;
    expect(RunEventsNotification.readParams(params)).toEqual({ ok: true, value: { runs: [{ runId: 'run_1', events: [{ kind: 'session', event: stored }] }] } });
  });

  it('serialises an event no log made like JSON.stringify does, and measures it the same', () => {
    const lone: SessionEvent = { type: 'usage', usage: { promptTokens: 1, completionTokens: 2, cacheHitTokens: 0, cacheMissTokens: 1, reasoningTokens: 0 } };
    const event: RunEvent = { kind: 'session', event: lone };
    const { batch, sent } = keptBatch();
    batch.add('run_1', event);
    batch.add('run_1', { kind: 'text-delta', text: 'next' });
    batch.flush();
    expect(JSON.parse(sent[0]!)).toEqual({ jsonrpc: '2.0', method: 'run/events', params: { runs: [{ runId: 'run_1', events: [event, { kind: 'text-delta', text: 'next' }] }] } });
    expect(sent[0]).toContain(JSON.stringify(event));
    // The budget counts the session event's JSON: a cap of exactly that admits it, one less cuts it.
    const size = JSON.stringify(lone).length;
    expect(new StreamBudget(size).admit(event)).toBe(event);
    expect(new StreamBudget(size - 1).admit(event)).toEqual({ kind: 'text-delta', text: TRUNCATION_MARKER });
  });
});
