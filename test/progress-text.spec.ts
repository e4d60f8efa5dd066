/** The wording of start progress, one home for the CLI's status line and the MCP face. */
import { expect, it } from 'vitest';
import { describeStartProgress, ordinal } from '../common/progress-text.js';

it('writes English ordinals, teens included', () => {
  expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111, 112].map(ordinal)).toEqual(['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '101st', '111th', '112th']);
});

it('says where a start stands', () => {
  expect(describeStartProgress({ kind: 'queued', position: 2 }, 'spawn')).toBe('queued (2nd in line)');
  expect(describeStartProgress({ kind: 'starting' }, 'spawn')).toBe('starting the spawn child');
  expect(describeStartProgress({ kind: 'agent', stage: 'spawning' }, 'qwen')).toBe('starting ACP agent… (spawning)');
  expect(describeStartProgress({ kind: 'agent', stage: 'initializing' }, 'qwen')).toBe('starting ACP agent… (initializing)');
  expect(describeStartProgress({ kind: 'ready', runId: 'run_x' }, 'qwen')).toBe('running');
});

it("reads the start's run events (1.6) as their $/progress twins, beside a model wait and retry", async () => {
  const { describeWait, isWaitEvent } = await import('../common/progress-text.js');
  const { describeEvent } = await import('../faces/mcp/progress.js');
  const { updatesForRunEvent } = await import('../faces/acp/session-updates.js');
  expect(describeWait({ kind: 'queued', position: 3 })).toBe('queued (3rd in line)');
  expect(describeWait({ kind: 'agent-starting', stage: 'initializing' })).toBe('starting ACP agent… (initializing)');
  expect(describeWait({ kind: 'model-wait', endpoint: 'http://m', position: 2 })).toBe('waiting for the model endpoint (2nd in line)');
  expect(isWaitEvent({ kind: 'text-delta', text: 'x' })).toBe(false);
  // MCP progress and ACP session updates carry the same words.
  expect(describeEvent({ kind: 'queued', position: 1 })).toBe('queued (1st in line)');
  expect(describeEvent({ kind: 'agent-starting', stage: 'spawning' })).toBe('starting ACP agent… (spawning)');
  const [update] = updatesForRunEvent({ kind: 'agent-starting', stage: 'spawning' });
  expect(update).toMatchObject({ sessionUpdate: 'session_info_update', _meta: { subagentd: { kind: 'agent-starting', stage: 'spawning', message: 'starting ACP agent… (spawning)' } } });
});
