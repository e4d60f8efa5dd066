/**
 * docs/operations.md's command table against the CLI's own (cli/commands.ts), so the docs cannot
 * drift: every command has a row, every flag it takes is named in its rows, and no row names a
 * command or flag the CLI does not have. The common flags are documented once above the table.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../cli/commands.js';
import { COMMON_FLAGS } from '../cli/options.js';

const REPO = join(import.meta.dirname, '..');

/** The table's rows as [command cell, flags cell]. */
function documentedRows(): Array<{ command: string; flags: string }> {
  const text = readFileSync(join(REPO, 'docs', 'operations.md'), 'utf8');
  const section = text.slice(text.indexOf('## Commands'), text.indexOf('\n## ', text.indexOf('## Commands') + 1));
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
      return { command: cells[1] ?? '', flags: `${cells[1] ?? ''} ${cells[2] ?? ''}` };
    });
}

const commandOf = (cell: string): string => /^`([a-z-]+)/.exec(cell)?.[1] ?? cell;
const flagsIn = (text: string): string[] => [...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]!);

describe('docs/operations.md command table', () => {
  const rows = documentedRows();

  it.each(COMMANDS.map((spec) => [spec.name, spec] as const))('documents `%s` and every flag it takes', (name, spec) => {
    const mine = rows.filter((row) => commandOf(row.command) === name);
    expect(mine, `no row for \`${name}\``).not.toHaveLength(0);
    const documented = new Set(mine.flatMap((row) => flagsIn(row.flags)));
    const missing = Object.keys(spec.flags ?? {}).filter((flag) => !documented.has(flag));
    expect(missing, `flags of \`${name}\` missing from its row`).toEqual([]);
  });

  it('names no command or flag that the CLI does not have', () => {
    const byName = new Map(COMMANDS.map((spec) => [spec.name, spec]));
    for (const row of rows) {
      const spec = byName.get(commandOf(row.command));
      expect(spec, `row for unknown command ${row.command}`).toBeDefined();
      const known = new Set([...Object.keys(spec?.flags ?? {}), ...Object.keys(COMMON_FLAGS)]);
      const unknown = flagsIn(row.flags).filter((flag) => !known.has(flag));
      expect(unknown, `flags in the row for ${row.command} that \`${spec?.name}\` does not take`).toEqual([]);
    }
  });
});
