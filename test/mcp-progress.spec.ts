/**
 * The MCP face's progress: which run events a host sees, that `progress` rises by one with every
 * notification, and that a quiet child still reports (the heartbeat) until the call ends. Fake
 * timers: the heartbeat is counted, not timed.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { describeEvent, ProgressForwarder } from '../faces/mcp/progress.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

it('describes tool calls, results and turn ends, and skips reasoning and blank text', () => {
  expect(describeEvent({ kind: 'session', event: { type: 'assistant/message', content: [], toolCalls: [{ id: 'a', name: 'read_file', arguments: '{}' }, { id: 'b', name: 'search_text', arguments: '{}' }] } })).toBe(
    'calling read_file, search_text',
  );
  expect(describeEvent({ kind: 'session', event: { type: 'tool/result', callId: 'a', name: 'read_file', content: [], isError: true } })).toBe('read_file failed');
  expect(describeEvent({ kind: 'session', event: { type: 'turn/end', reason: 'max-steps' } })).toBe('turn ended: max-steps');
  expect(describeEvent({ kind: 'text-delta', text: 'Hello' })).toBe('Hello');
  expect(describeEvent({ kind: 'text-delta', text: '  \n' })).toBeUndefined();
  expect(describeEvent({ kind: 'reasoning-delta', text: 'hmm' })).toBeUndefined();
  expect(describeEvent({ kind: 'session', event: { type: 'assistant/message', content: [{ type: 'text', text: 'x' }] } })).toBeUndefined();
});

it('describes a model retry with its delay and attempt; busy for 429 and 503, else the reason', () => {
  expect(describeEvent({ kind: 'retry', attempt: 2, delayMs: 2000, reason: 'HTTP 429: Rate limit reached', status: 429 })).toBe(
    'model busy, retrying in 2.0 s (attempt 2)',
  );
  expect(describeEvent({ kind: 'retry', attempt: 3, delayMs: 750, reason: 'cannot reach http://127.0.0.1:9/v1: Connection error.' })).toBe(
    'model failed (cannot reach http://127.0.0.1:9/v1: Connection error.), retrying in 0.8 s (attempt 3)',
  );
});

it('reports events and heartbeats with a rising progress, and stops with the call', async () => {
  const sent: Array<[number, string]> = [];
  const forwarder = new ProgressForwarder(async (progress, message) => void sent.push([progress, message]), 1000);
  forwarder.onEvent({ kind: 'session', event: { type: 'tool/result', callId: 'a', name: 'list_directory', content: [], isError: false } });
  await vi.advanceTimersByTimeAsync(2500);
  forwarder.onEvent({ kind: 'text-delta', text: 'Done.' });
  forwarder.stop();
  await vi.advanceTimersByTimeAsync(5000);
  expect(sent).toEqual([
    [1, 'list_directory done'],
    [2, 'working'],
    [3, 'working'],
    [4, 'Done.'],
  ]);
});

it('keeps going when a notification cannot be sent', async () => {
  let attempts = 0;
  const forwarder = new ProgressForwarder(async () => {
    attempts += 1;
    throw new Error('the host went away');
  }, 1000);
  await vi.advanceTimersByTimeAsync(3000);
  forwarder.stop();
  expect(attempts).toBe(3);
});
