/**
 * The model-facing control surface over continuable children: `send_message` (a later turn for
 * one of your children), `interrupt_agent` (stop a child's current turn, park its inbox until the next message) and
 * `list_agents` (your children or all descendants). Authority is the service's (only the direct
 * parent sends, the parent or an ancestor interrupts); a refusal comes back as an error result
 * with the service's reason. Every call needs a calling agent.
 */
import type { ChildEntry, ChildListing, ContinuableChildren, InterruptLevel } from '../protocol/index.js';
import { messageOf, needsParent, textResult, type ToolDefinition, type ToolResult } from './tool-definition.js';

export interface ChildControlOptions {
  /** The level `interrupt_agent` uses; default `now` (the current turn is cancelled). */
  readonly interruptLevel?: InterruptLevel;
}

export interface ChildControlTools<Parent> {
  readonly sendMessage: ToolDefinition<Parent>;
  readonly interruptAgent: ToolDefinition<Parent>;
  readonly listAgents: ToolDefinition<Parent>;
  /** The three, in that order. */
  readonly all: readonly ToolDefinition<Parent>[];
}

export function createChildControlTools<Parent>(
  children: ContinuableChildren<never, Parent>,
  options: ChildControlOptions = {},
): ChildControlTools<Parent> {
  const level = options.interruptLevel ?? 'now';
  const sendMessage: ToolDefinition<Parent> = {
    name: 'send_message',
    description:
      'Send a message to one of your subagents (a child you started). It keeps its context: a running subagent takes the message as its next turn after the current one, an idle one wakes up and works on it. Returns at once; you get a message when the subagent settles.',
    inputSchema: objectSchema(
      {
        subagent_id: { type: 'string', description: 'The id the subagent call returned.' },
        message: { type: 'string', description: 'What to tell or ask the subagent.' },
      },
      ['subagent_id', 'message'],
    ),
    async execute(input, { parent }) {
      if (parent === undefined) return needsParent('send_message');
      const args = strings(input, ['subagent_id', 'message']);
      if (typeof args === 'string') return textResult(`send_message ${args}`, true);
      return attempt('send_message', async () => {
        const { messageId } = await children.sendMessage(args['subagent_id']!, [{ type: 'text', text: args['message']! }], parent);
        return `message ${messageId} delivered to subagent ${args['subagent_id']}; it becomes its next turn`;
      });
    },
  };
  const interruptAgent: ToolDefinition<Parent> = {
    name: 'interrupt_agent',
    description:
      'Stop the current turn of one of your subagents or of their descendants. Messages already queued for it are kept until your next send_message to it; an agent that has already settled is left as it is.',
    inputSchema: objectSchema({ agent_id: { type: 'string', description: 'The id of the agent to interrupt.' } }, ['agent_id']),
    async execute(input, { parent }) {
      if (parent === undefined) return needsParent('interrupt_agent');
      const args = strings(input, ['agent_id']);
      if (typeof args === 'string') return textResult(`interrupt_agent ${args}`, true);
      return attempt('interrupt_agent', async () => {
        await children.interrupt(args['agent_id']!, parent, level);
        return `interrupted agent ${args['agent_id']} (${level === 'now' ? 'its current turn was stopped' : 'it stops after its current step'})`;
      });
    },
  };
  const listAgents: ToolDefinition<Parent> = {
    name: 'list_agents',
    description:
      'List your subagents with their status (running or idle), label and whether they have children of their own. scope "descendants" lists their children too.',
    inputSchema: objectSchema(
      { scope: { type: 'string', enum: ['children', 'descendants'], description: 'Default "children": your direct subagents only.' } },
      [],
    ),
    async execute(input, { parent }) {
      if (parent === undefined) return needsParent('list_agents');
      const scope = typeof input === 'object' && input !== null ? (input as { scope?: unknown }).scope : undefined;
      if (scope !== undefined && scope !== 'children' && scope !== 'descendants') {
        return textResult('list_agents: scope must be "children" or "descendants"', true);
      }
      return attempt('list_agents', async () => formatListing(await children.list(parent, scope ?? 'children')));
    },
  };
  return { sendMessage, interruptAgent, listAgents, all: [sendMessage, interruptAgent, listAgents] };
}

/** One line per entry (indented by depth for descendants), then the unreadable ones. */
export function formatListing(listing: ChildListing): string {
  const lines = listing.entries.map(formatEntry);
  if (lines.length === 0) lines.push('no subagents');
  for (const diagnostic of listing.diagnostics) lines.push(`unreadable entry: ${diagnostic}`);
  return lines.join('\n');
}

function formatEntry(entry: ChildEntry): string {
  const indent = entry.depth !== undefined && entry.depth > 1 ? '  '.repeat(entry.depth - 1) : '';
  const label = entry.label === undefined ? '' : ` "${entry.label}"`;
  const parent = entry.parentId === undefined ? '' : ` parent=${entry.parentId}`;
  const kids = entry.hasChildren ? ' has-children' : '';
  return `${indent}${entry.id} ${entry.status}${label}${parent}${kids}`;
}

async function attempt(tool: string, work: () => Promise<string>): Promise<ToolResult> {
  try {
    return textResult(await work());
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? ` (${String((error as { code: unknown }).code)})` : '';
    return textResult(`${tool} failed${code}: ${messageOf(error)}`, true);
  }
}

function strings(input: unknown, keys: readonly string[]): Record<string, string> | string {
  const args = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = args[key];
    if (typeof value !== 'string' || value === '') return `needs ${key}, a non-empty string`;
    out[key] = value;
  }
  return out;
}

function objectSchema(properties: Record<string, unknown>, required: string[]): Record<string, unknown> {
  return { type: 'object', properties, required, additionalProperties: false };
}
