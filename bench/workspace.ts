/**
 * The child agents' world: a small temp workspace to list, read and search, and the scripted
 * model scripts (format: daemon/agent/model/scripted.ts) the children replay.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelScript } from '../daemon/agent/model/scripted.js';
import type { Cleanup } from './procs.js';

export interface BenchWorld {
  /** The parent's cwd: the children's workspace root. */
  readonly workspace: string;
  /** 5 model steps, 4 tool calls (list_directory, read_file ×2, search_text), then the answer. */
  readonly fiveStep: string;
  /** One tool call, then a step that waits 10 minutes: a child that sits idle mid-run. */
  readonly hold: string;
  /** Many one-step text turns: one per prompt of a resumed session. */
  readonly chat: string;
  /** A long, talkative run: many steps, each streaming ~8 KiB of text and making a tool call. */
  readonly chatty: string;
  /** The most events a run may make: 50 steps of short text deltas and a cheap (unknown) tool call. */
  readonly stream: string;
  readonly scriptsDir: string;
}

/** Model steps of the chatty script. */
export const CHATTY_STEPS = 40;

const usage = { promptTokens: 400, completionTokens: 30, cacheMissTokens: 400 };

export function makeWorld(cleanup: Cleanup): BenchWorld {
  const root = cleanup.tempDir('subagentd-bench-world-');
  const workspace = join(root, 'workspace');
  mkdirSync(join(workspace, 'notes'), { recursive: true });
  mkdirSync(join(workspace, 'src'), { recursive: true });
  const line = (i: number): string => `line ${i}: the quick brown fox jumps over the lazy dog\n`;
  writeFileSync(join(workspace, 'README.md'), '# bench workspace\n\nA few files for child agents to read.\n');
  writeFileSync(join(workspace, 'notes', 'a.txt'), Array.from({ length: 60 }, (_, i) => line(i)).join(''));
  writeFileSync(join(workspace, 'notes', 'b.txt'), `${Array.from({ length: 40 }, (_, i) => line(i)).join('')}the needle is here\n`);
  for (let i = 0; i < 8; i++) writeFileSync(join(workspace, 'src', `module-${i}.ts`), `export const value${i} = ${i};\n`);

  const scriptsDir = join(root, 'scripts');
  mkdirSync(scriptsDir);
  const write = (name: string, script: ModelScript): string => {
    const path = join(scriptsDir, name);
    writeFileSync(path, JSON.stringify(script));
    return path;
  };
  const fiveStep = write('five-step.json', {
    steps: [
      { text: 'Let me look around.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], usage },
      { text: 'Reading the first note.', toolCalls: [{ name: 'read_file', arguments: { path: 'notes/a.txt' } }], usage },
      { text: 'And the second.', toolCalls: [{ name: 'read_file', arguments: { path: 'notes/b.txt', startLine: 30 } }], usage },
      { text: 'Where is the needle?', toolCalls: [{ name: 'search_text', arguments: { query: 'needle', path: 'notes' } }], usage },
      { text: 'The needle is in notes/b.txt, on line 41.', finish: 'stop', usage },
    ],
  });
  const hold = write('hold.json', {
    steps: [
      { text: 'Looking first.', toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], usage },
      { text: 'never reached', delayMs: 600_000 },
    ],
  });
  const chat = write('chat.json', {
    steps: Array.from({ length: 400 }, (_, i) => ({ text: `answer ${i}`, finish: 'stop' as const, usage })),
  });
  const paragraph = 'All work and no play makes the child agent a dull agent. '.repeat(140);
  const chatty = write('chatty.json', {
    steps: [
      ...Array.from({ length: CHATTY_STEPS - 1 }, () => ({
        text: paragraph,
        toolCalls: [{ name: 'list_directory', arguments: { path: 'src' } }],
        delayMs: 10,
        usage,
      })),
      { text: 'done talking', finish: 'stop' as const, usage },
    ],
  });
  // The loop's default step cap is 50. Each step: 3 text deltas, the assistant message, usage, the
  // call and its error result (no such tool: no disk work), i.e. events the session log writes too.
  const stream = write('stream.json', {
    steps: [
      ...Array.from({ length: 49 }, (_, i) => ({
        text: `step ${i}: streaming a few short deltas`,
        toolCalls: [{ name: 'no_such_tool', arguments: { step: i } }],
        usage,
      })),
      { text: 'done streaming', finish: 'stop' as const, usage },
    ],
  });
  return { workspace, fiveStep, hold, chat, chatty, stream, scriptsDir };
}
