// A parent "model" that uses the subagent tool, offline: `npm run build && node examples/subagent-tool.mjs`.
// A private daemon runs on stdio; its spawn child replays examples/hello.json (the scripted model).
import { fileURLToPath } from 'node:url';
import { connect, createSubagentTool } from '../dist/client/index.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const service = await connect({ spawn: 'stdio' });
const subagent = createSubagentTool(service, {
  provider: 'spawn',
  agentOptions: { model: `scripted:${here}hello.json` },
});
const parent = { sessionId: 'example-parent', cwd: fileURLToPath(new URL('..', import.meta.url)) };

// What the model is offered: the tool while its provider is registered, and the job tools.
const offered = () => [subagent.current(), ...subagent.jobTools()].filter(Boolean);
console.log(`offered: ${offered().map((tool) => tool.name).join(', ')}\n${subagent.current().description}\n`);

// The "model": a script of tool calls, one turn per entry; each result goes back into the transcript.
const script = [
  [{ name: 'subagent', input: { description: 'Summarise the repo', prompt: 'Summarise this repository' } }],
  [{ name: 'subagent', input: { description: 'Summarise again', prompt: 'Summarise this repository', run_in_background: true } }],
  [{ name: 'job_output', input: { job_id: 'subagent-1', wait: true } }],
];
for (const turn of script) {
  const tools = new Map(offered().map((tool) => [tool.name, tool]));
  const results = await Promise.all(turn.map((call) => tools.get(call.name).execute(call.input, { parent, signal: AbortSignal.timeout(60_000) })));
  results.forEach((result, i) => console.log(`${turn[i].name} → ${result.isError ? 'error: ' : ''}${result.content.map((b) => b.text ?? '').join('')}\n`));
}
await subagent.dispose();
await service.close();
