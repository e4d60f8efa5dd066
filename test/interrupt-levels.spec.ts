/**
 * The two interrupt levels on an in-process child: `after-step` lets the step in flight (its
 * model call and tool calls) finish and then ends the turn; `now` cancels at once.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { SessionEvent } from '../protocol/index.js';
import { createSpawnProvider } from '../daemon/providers/in-process/index.js';
import { fakeHost, providerOptions, scriptedModel, startRequest, text, toolResults, useTempDirs, waitFor } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const types = (events: readonly SessionEvent[]) => events.map((e) => e.type);

async function slowToolStep() {
  const sessionsDir = join(await tempDir('sessions-'), 'sessions');
  const workspace = await tempDir('ws-');
  // Step one is still "thinking" when the interrupt arrives; step two must never be asked for.
  const model = scriptedModel({
    steps: [{ text: 'looking', toolCalls: [{ name: 'list_directory', arguments: {} }], delayMs: 300 }, { text: 'never reached' }],
  });
  const provider = createSpawnProvider(providerOptions(sessionsDir, model.resolve));
  const run = await provider.start(startRequest(workspace, fakeHost(), { prompt: text('task') }));
  await waitFor(() => model.steps.length === 1);
  return { run, model };
}

it('after-step: the step in flight and its tool calls finish, then the turn ends aborted without another model step', async () => {
  const { run, model } = await slowToolStep();
  run.interrupt('after-step');
  const result = await run.result;
  expect(result.stopReason).toBe('aborted');
  expect(model.steps).toHaveLength(1);
  const events = run.localAgent.events;
  expect(types(events)).toEqual(['user/message', 'assistant/message', 'tool/result', 'turn/end']);
  expect(toolResults(events)).toMatchObject([{ name: 'list_directory', isError: false }]);
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'aborted', diagnostic: 'interrupted after a step' });
});

it('now: the step in flight is abandoned and its tool call never runs', async () => {
  const { run, model } = await slowToolStep();
  run.interrupt('now');
  expect((await run.result).stopReason).toBe('aborted');
  expect(model.steps).toHaveLength(1);
  expect(types(run.localAgent.events)).toEqual(['user/message', 'turn/end']);
});

it('an after-step interrupt is forgotten by the next turn', async () => {
  const { run } = await slowToolStep();
  run.interrupt('after-step');
  await run.result;
  run.interrupt('after-step'); // settled: a no-op
  const next = await run.resume(text('again'));
  expect((await next.result).stopReason).toBe('completed');
});
