/**
 * The child-side `report` tool of a continuable child: tell the parent something without ending
 * the turn. `quiet` is for the parent's next turn; `next-step` asks to steer the parent's running
 * turn. Delivery belongs to whoever gave the child the sink (the daemon's children service).
 */
import { textOutcome, type AgentTool } from './tool.js';

export const REPORT_TOOL = 'report';

export type ReportMode = 'quiet' | 'next-step';
export type ReportSink = (output: string, mode: ReportMode) => void;

export function reportTool(sink: ReportSink): AgentTool {
  return {
    name: REPORT_TOOL,
    description:
      'Send a progress report to the agent that started you, without ending your turn. mode "quiet" (default): your parent reads it at its next turn. mode "next-step": your parent sees it at its next step, to steer it now; use it only for what cannot wait.',
    parameters: {
      type: 'object',
      properties: {
        output: { type: 'string', minLength: 1, description: 'What to tell your parent.' },
        mode: { enum: ['quiet', 'next-step'] },
      },
      required: ['output'],
      additionalProperties: false,
    },
    async execute(args) {
      const { output, mode } = args as { output: string; mode?: ReportMode };
      sink(output, mode ?? 'quiet');
      return textOutcome(mode === 'next-step' ? 'reported; your parent sees it at its next step' : 'reported; your parent sees it at its next turn');
    },
  };
}
