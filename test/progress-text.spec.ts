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
