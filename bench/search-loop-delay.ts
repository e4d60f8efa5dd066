/**
 * How long `search_text` holds the event loop, measured in this process where the OS scheduler
 * adds nothing: the loop's delay (perf_hooks histogram, 1 ms resolution) while a catastrophic
 * pattern is searched over 8 MiB, and the time from an abort to the tool's return.
 *
 * Run: npm run build && node dist/bench/search-loop-delay.js
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { ToolRegistry } from '../daemon/agent/tools/tool-registry.js';
import { workspaceTools } from '../daemon/agent/tools/workspace-tools.js';
import { Workspace } from '../daemon/workspace/workspace.js';

const PATTERNS = ['(a+)+$', '(.*a){20}$'];
const LINE = `${'a'.repeat(30)}!\n`;

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'subagentd-bench-search-'));
  try {
    for (let i = 0; i < 8; i++) writeFileSync(join(root, `evil-${i}.txt`), LINE.repeat(32_000));
    const registry = new ToolRegistry(workspaceTools(await Workspace.open(root), { write: false, shell: false }, {}));
    const search = (query: string, signal: AbortSignal) =>
      registry.invoke({ id: 'b', name: 'search_text', arguments: JSON.stringify({ query, regex: true }) }, { callId: 'b', signal });
    for (const query of PATTERNS) {
      const delay = monitorEventLoopDelay({ resolution: 1 });
      delay.enable();
      const t0 = performance.now();
      const outcome = await search(query, new AbortController().signal);
      const searchMs = performance.now() - t0;
      delay.disable();
      const ms = (ns: number): string => (ns / 1e6).toFixed(1);
      // Cancel: abort once the search has run for a while, time until the tool returns.
      const controller = new AbortController();
      let abortedAt = 0;
      setTimeout(() => {
        abortedAt = performance.now();
        controller.abort();
      }, Math.min(200, searchMs / 2));
      const cancelled = await search(query, controller.signal);
      const cancelMs = performance.now() - abortedAt;
      const text = (o: typeof outcome): string => o.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      console.log(
        `${query} over 8 MiB: ${searchMs.toFixed(0)} ms (${text(outcome)}); loop delay p50 ${ms(delay.percentile(50))} ms, ` +
          `p99 ${ms(delay.percentile(99))} ms, max ${ms(delay.max)} ms; abort -> return ${cancelMs.toFixed(1)} ms (${text(cancelled)})`,
      );
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
