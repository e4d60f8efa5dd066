// A real deepseek-harness app (published packages, library level) with `subagentd/harness` loaded
// beside the harness's own `tool-subagent`. Run by test/harness-lane.e2e.ts under Node 22 from a
// directory whose node_modules holds the harness packages and subagentd.
//
// Scenario (JSON file named by argv[2]):
//   { socket, sessionId?, cwd?, bridge?: {...plugin config}, tools?: [...extra tool-subagent configs],
//     turns: [ { user: "text", steps: [ {text} | {toolCalls: [{name, args}]} ], cancelOnChildStart? } ] }
// The parent's model is this file's scripted adapter: each model request takes the next step.
// Output (stdout, one JSON line): { providers, turns: [{ toolResults, endReason }], parentLog, log }.
import { Context } from '@deepseek-ai/cordis';
import Session from '@deepseek-ai/dsh-session';
import Llm, { LlmAdapter } from '@deepseek-ai/dsh-llm';
import Tools from '@deepseek-ai/dsh-tools';
import SystemPrompt from '@deepseek-ai/dsh-system-prompt';
import Agents from '@deepseek-ai/dsh-agent';
import AgentLoop from '@deepseek-ai/dsh-agent-loop';
import Subagents from '@deepseek-ai/dsh-subagent';
import * as toolSubagent from '@deepseek-ai/dsh-tool-subagent';
import subagentd from 'subagentd/harness';
import { readFileSync } from 'node:fs';

const scenario = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const steps = scenario.turns.flatMap((turn) => turn.steps);
const seen = []; // per model request: the tool results it was shown
const log = [];
let cursor = 0;

class ScriptedParent extends LlmAdapter {
  async *stream(options) {
    const last = options.messages.at(-1);
    seen.push((last?.content ?? []).filter((block) => block.type === 'tool-result'));
    const step = steps[cursor++] ?? { text: 'script exhausted' };
    let index = 0;
    for (const call of step.toolCalls ?? []) {
      const block = { type: 'tool-call', id: `call_${cursor}_${index}`, name: call.name, arguments: JSON.stringify(call.args) };
      yield { type: 'block-start', index, blockType: 'tool-call' };
      yield { type: 'tool-call-delta', index, id: block.id, name: block.name, argumentsDelta: block.arguments };
      yield { type: 'block-end', index, block };
      index++;
    }
    if (step.text !== undefined) {
      yield { type: 'block-start', index, blockType: 'text' };
      yield { type: 'text-delta', index, text: step.text };
      yield { type: 'block-end', index, block: { type: 'text', text: step.text } };
    }
    yield { type: 'finish', reason: { kind: step.toolCalls ? 'tool-calls' : 'stop' } };
  }
}

const ctx = new Context();
// Cordis has no log exporter by default: keep every line for the test.
ctx.logger.exporter({ levels: { base: 3 }, export: (message) => log.push({ name: message.name, type: message.type, text: message.args.join(' ') }) });
for (const plugin of [Session, Llm, Tools, SystemPrompt, Agents]) await ctx.plugin(plugin);
await ctx.plugin(AgentLoop, { agents: [] });
await ctx.plugin(Subagents);
ctx.llm.registerAdapter(['scripted'], new ScriptedParent());
const providers = [];
ctx.on('subagent/provider-added', (provider) => providers.push(provider.name));
const childStarts = [];
ctx.on('subagent/start', (info) => childStarts.push(info));
for (const tool of [{ provider: 'spawn' }, ...(scenario.tools ?? [])]) await ctx.plugin(toolSubagent, { enableRunInBackground: false, ...tool });
await ctx.plugin(subagentd, { socket: scenario.socket, ...scenario.bridge });

const handle = await ctx.agents.create({
  sessionId: scenario.sessionId ?? `harness-parent-${process.pid}`,
  meta: { cwd: scenario.cwd ?? process.cwd() },
  agentOptions: { provider: 'scripted', model: 'parent' },
});
const { agent } = handle;
const turns = [];
for (const turn of scenario.turns) {
  const before = seen.length;
  agent.followup({ role: 'user', content: [{ type: 'text', text: turn.user }] });
  if (turn.cancelOnChildStart) {
    const started = childStarts.length;
    await new Promise((resolve) => {
      const poll = setInterval(() => childStarts.length > started && (clearInterval(poll), resolve()), 10);
    });
    agent.cancel(new Error('cancelled by the test'), { keepInbox: false });
  }
  await agent.whenIdle();
  const ends = [...agent.session.events].filter((event) => event.type === 'turn/end');
  turns.push({ toolResults: seen.slice(before).flat(), endReason: ends.at(-1)?.data?.reason?.kind });
}
const parentLog = [...agent.session.events];
await handle.dispose();
await ctx.fiber.dispose?.();
process.stdout.write(JSON.stringify({ providers, childStarts, turns, parentLog, log }) + '\n');
process.exit(0);
