/**
 * The client never loses a run's end (issue #10 item 8c): a `subagent/end` that fails the
 * client's inbound schema — an answer over the text cap both sides share (MAX_TEXT_BYTES in
 * protocol/output-cap.ts) — rejects the run's result with a typed error naming the field, where
 * it used to be dropped and leave `run.result` pending for ever.
 */
import { afterEach, expect, it } from 'vitest';
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { MAX_TEXT_BYTES } from '../protocol/index.js';
import { FakeDaemon, captureLogger } from './support/fake-daemon-peer.js';
import { within } from './support/reconnect-harness.js';

let daemon: FakeDaemon;
let service: RemoteSubagentService;
afterEach(async () => {
  await service?.close();
  await daemon?.close();
});

it('an end over the text cap rejects run.result with INVALID_REQUEST naming the field, and end listeners hear it', { timeout: 20_000 }, async () => {
  daemon = await FakeDaemon.start();
  const logger = captureLogger();
  service = await connect({ socket: daemon.socketPath, logger });
  const ends: unknown[] = [];
  service.on('subagent/end', (event) => {
    ends.push(event);
  });
  const run = await service.start('spawn', {
    prompt: [{ type: 'text', text: 't' }],
    signal: new AbortController().signal,
    parent: { sessionId: 'p', cwd: '/w' },
  });
  const peer = await daemon.connection();
  await peer.finishRun(run.id, { output: [{ type: 'text', text: 'x'.repeat(MAX_TEXT_BYTES + 1) }], stopReason: 'completed' });
  const error = await within(run.result.then(() => undefined, (e: unknown) => e), 10_000, 'the run result');
  expect(error).toBeInstanceOf(SubagentError);
  expect(error).toMatchObject({ code: 'INVALID_REQUEST' });
  expect((error as Error).message).toMatch(new RegExp(`invalid subagent/end for run ${run.id}: .*must NOT have more than ${MAX_TEXT_BYTES} characters`));
  expect(ends).toEqual([{ runId: run.id, provider: 'spawn', id: `child-${run.id}`, local: false, stopReason: 'error' }]);
});
