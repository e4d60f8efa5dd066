/**
 * `search_text` never holds the event loop: a catastrophic pattern runs in linear time and in
 * slices, a cancel lands between slices, RE2's refusals read clearly, and a FIFO in the
 * workspace is skipped instead of blocking the walk. Assertions are on outcomes and on how many
 * loop turns happened during a search, never on durations.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ToolRegistry } from '../daemon/agent/tools/tool-registry.js';
import { workspaceTools } from '../daemon/agent/tools/workspace-tools.js';
import { Workspace } from '../daemon/workspace/workspace.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

/** Lines on which a backtracking engine takes seconds each for `(a+)+$`. */
const EVIL_LINE = `${'a'.repeat(30)}!\n`;

async function searcher(files: Record<string, string>) {
  const root = await tempDir('search-');
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(root, name, '..'), { recursive: true });
    await writeFile(join(root, name), text);
  }
  const registry = new ToolRegistry(workspaceTools(await Workspace.open(root), { write: false, shell: false }, {}));
  const search = async (args: Record<string, unknown>, signal = new AbortController().signal) => {
    const outcome = await registry.invoke({ id: 's', name: 'search_text', arguments: JSON.stringify(args) }, { callId: 's', signal });
    return { isError: outcome.isError, text: outcome.content.map((b) => (b.type === 'text' ? b.text : '')).join('') };
  };
  return { root, search };
}

/** Counts event-loop turns until stopped: proof that other work ran during a search. */
function loopTurns(onTurn: (turns: number) => void = () => undefined): { stop(): number } {
  let turns = 0;
  let running = true;
  const tick = (): void => {
    if (!running) return;
    turns += 1;
    onTurn(turns);
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop: () => {
      running = false;
      return turns;
    },
  };
}

describe('search_text', () => {
  it('searches a catastrophic pattern in linear time, giving the loop back while it works', async () => {
    const { search } = await searcher({ 'a.txt': EVIL_LINE.repeat(20_000), 'sub/b.txt': `${EVIL_LINE.repeat(5000)}aaa\n` });
    const turns = loopTurns();
    const found = await search({ query: '(a+)+$', regex: true });
    const during = turns.stop();
    expect(found).toEqual({ isError: false, text: 'sub/b.txt:5001: aaa' });
    expect(during).toBeGreaterThan(5);
  });

  it('stops at a cancel delivered while it runs', async () => {
    const { search } = await searcher({ 'a.txt': EVIL_LINE.repeat(30_000), 'b.txt': EVIL_LINE.repeat(30_000) });
    const controller = new AbortController();
    // Aborted from another loop turn: only a search that yields can ever see it before it ends.
    const turns = loopTurns((n) => n === 3 && controller.abort());
    const outcome = await search({ query: '(a+)+$', regex: true }, controller.signal);
    turns.stop();
    expect(outcome).toEqual({ isError: true, text: 'search cancelled' });
  });

  it('explains what RE2 refuses, and matches literals and case-insensitively', async () => {
    const { search } = await searcher({ 'f.txt': 'x = a+b\nHello World\n' });
    for (const query of ['a(?=b)', '(a)\\1', '(?<=x)y', 'a{2000}']) {
      const refused = await search({ query, regex: true });
      expect(refused.isError, query).toBe(true);
      expect(refused.text, query).toMatch(/RE2 syntax/);
    }
    expect(await search({ query: 'a+b' })).toEqual({ isError: false, text: 'f.txt:1: x = a+b' });
    expect(await search({ query: 'hello', ignoreCase: true })).toEqual({ isError: false, text: 'f.txt:2: Hello World' });
    expect((await search({ query: 'x'.repeat(300) })).text).toMatch(/must NOT have more than 256 characters/);
  });

  it('skips a FIFO in the walk and refuses it by name, without blocking', async () => {
    const { root, search } = await searcher({ 'f.txt': 'needle\n' });
    execFileSync('mkfifo', [join(root, 'pipe')]);
    expect(await search({ query: 'needle' })).toEqual({ isError: false, text: 'f.txt:1: needle' });
    const named = await search({ query: 'needle', path: 'pipe' });
    expect(named.isError).toBe(true);
    expect(named.text).toMatch(/not a regular file/);
  });
});
