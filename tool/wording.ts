/**
 * What the model reads: the subagent tool's description and input schema, derived from the
 * provider's `inheritsParentContext` and the background settings, so the wording never promises
 * what the child does not get. Pinned fragments (tests hold them): "does not see this
 * conversation" / "include everything it needs" for a fresh child, "inherits this conversation" /
 * "completed turns" for a forked one, "waits for the subagent and returns its result" when
 * background runs are off.
 */
import type { BackgroundMode } from './config.js';

export interface WordingInput {
  readonly inheritsParentContext: boolean;
  readonly enableRunInBackground: boolean;
  readonly backgroundMode: BackgroundMode;
  readonly jobOutputTool: string;
  readonly jobKillTool: string;
  /** Each child works in its own git worktree and branch (tool config `isolation: 'worktree'`). */
  readonly worktree?: boolean;
}

export interface ToolWording {
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
}

export function deriveWording(input: WordingInput): ToolWording {
  const lead = input.inheritsParentContext
    ? 'Delegate a task to a child agent that inherits this conversation: it starts with the completed turns so far (not the current, unfinished one) and then works on its own. You get its result, not its steps.'
    : 'Delegate a self-contained task to a separate agent that works in its own context. It does not see this conversation: it knows only the prompt you give it. You get its result, not its steps.';
  const promptText = input.inheritsParentContext
    ? 'The task for the child. It already has the completed turns of this conversation, so state only what is new: the goal, what was decided in the current turn, and what to report back.'
    : 'The complete task for the subagent. It starts from nothing, so include everything it needs: the goal, the relevant files and facts, the constraints, and what to report back.';
  const properties: Record<string, unknown> = {
    description: { type: 'string', description: 'A short description of the task (3-5 words), shown as the run\'s label.' },
    prompt: { type: 'string', description: promptText },
  };
  if (input.enableRunInBackground) {
    properties['run_in_background'] = {
      type: 'boolean',
      description:
        input.backgroundMode === 'continuable'
          ? 'Default true: start a continuable subagent and return its id at once. false: wait for a one-shot subagent and return its result.'
          : 'Default false. true: return a job id at once instead of waiting.',
    };
  }
  const isolated = input.worktree
    ? ' It works on its own branch, in its own git worktree of your repository: its file changes never touch your working tree, and its result names the branch and what changed there, for you to review and merge.'
    : '';
  return {
    description: `${lead}${isolated} ${suffix(input)}`,
    inputSchema: { type: 'object', properties, required: ['description', 'prompt'], additionalProperties: false },
  };
}

function suffix(input: WordingInput): string {
  if (!input.enableRunInBackground) return 'The call waits for the subagent and returns its result.';
  if (input.backgroundMode === 'continuable') {
    return (
      'By default the subagent runs in the background: the call returns its durable id at once, and you get a message when it settles. ' +
      'It keeps its context: send_message {subagent_id, message} starts a later turn with it, interrupt_agent {agent_id} stops its current turn, and list_agents shows your subagents. ' +
      'With run_in_background: false the call waits for the subagent and returns its result instead.'
    );
  }
  return (
    'By default the call waits for the subagent and returns its result. ' +
    `With run_in_background: true it returns a job id at once: read the job's result with ${input.jobOutputTool} {job_id} and stop the job with ${input.jobKillTool} {job_id}.`
  );
}
