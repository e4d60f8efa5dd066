/**
 * The repo paths that docs/architecture.md and CONTRIBUTING.md name must exist, so a renamed or
 * removed file fails CI instead of leaving a page that sends a newcomer to nowhere.
 *
 * What counts as a path (outside fenced code blocks, which hold examples):
 * - a backticked token with a `/` that ends in a file extension or in `/`, and is neither absolute,
 *   nor an import specifier (`../protocol/index.js`), nor a pattern (`<…>`, `*`, `{…}`, a `NAME` placeholder), nor a URL: it is read from the repo root (`dist/X.js` as the source
 *   `X.ts` it is built from);
 * - a backticked bare file name ending in `.ts`, `.mjs` or `.md`: it must be at the root or name
 *   exactly one file of the tree; when several share the name, the page must write the whole path;
 * - a relative markdown link target, read from the page's own folder.
 * A wire method such as `tool/call` has no extension and is not a path.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const PAGES = ['docs/architecture.md', 'CONTRIBUTING.md'];
const NOT_OURS = new Set(['node_modules', 'dist', 'coverage', '.git']);

interface Named {
  readonly line: number;
  readonly path: string;
  readonly kind: 'path' | 'name' | 'link';
}

/** Every path-like mention of one page, with its line. */
function namedPaths(page: string, text: string): Named[] {
  const found: Named[] = [];
  let fenced = false;
  text.split('\n').forEach((line, index) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) return;
    for (const [, token] of line.matchAll(/`([^`\s]+)`/g)) {
      if (!token || /[<>*{}:]|\bNAME\b/.test(token) || /^(\/|~|\.\.?\/)/.test(token)) continue;
      if (token.includes('/') && /(\.[a-z]+|\/)$/.test(token)) {
        const built = /^dist\/(.+)\.js$/.exec(token);
        found.push({ line: index + 1, path: built ? `${built[1]}.ts` : token.replace(/\/$/, ''), kind: 'path' });
      } else if (!token.includes('/') && /^[\w.-]+\.(ts|mjs|md)$/.test(token)) {
        found.push({ line: index + 1, path: token, kind: 'name' });
      }
    }
    for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const path = target?.split('#')[0];
      if (!path || /^[a-z]+:/.test(path)) continue;
      found.push({ line: index + 1, path: normalize(join(dirname(page), path)).replace(/\/$/, ''), kind: 'link' });
    }
  });
  return found;
}

/** How many files of the tree bear each file name. */
function fileNames(root: string): Map<string, number> {
  const names = new Map<string, number>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (NOT_OURS.has(entry.name)) continue;
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else names.set(entry.name, (names.get(entry.name) ?? 0) + 1);
    }
  };
  walk('.');
  return names;
}

/** One line per mention that leads nowhere; empty when the page is true to the tree. */
function brokenPaths(root: string, page: string, text: string, names = fileNames(root)): string[] {
  const problems: string[] = [];
  for (const { line, path, kind } of namedPaths(page, text)) {
    if (kind !== 'name') {
      if (!existsSync(join(root, path))) problems.push(`${page}:${line}: ${path} does not exist`);
    } else if (!existsSync(join(root, path))) {
      const count = names.get(path) ?? 0;
      if (count === 0) problems.push(`${page}:${line}: no file is named ${path}`);
      else if (count > 1) problems.push(`${page}:${line}: ${count} files are named ${path}; write the whole path`);
    }
  }
  return problems;
}

describe('paths named by the contributor docs', () => {
  const names = fileNames(REPO);

  it.each(PAGES)('%s names only files and folders that exist', (page) => {
    const text = readFileSync(join(REPO, page), 'utf8');
    expect(namedPaths(page, text).length, 'the page names paths').toBeGreaterThan(10);
    expect(brokenPaths(REPO, page, text, names)).toEqual([]);
  });

  it('the check catches a moved file, an ambiguous name and a dead link, and leaves wire methods alone', () => {
    const page = [
      'The reader is `daemon/connection/guarded-reader.ts`, built as `dist/cli/main.js`, in `daemon/agent/`.',
      'Moved: `session/session-log.ts`, `daemon/gone/` and `nowhere.ts`; ambiguous: `config.ts`.',
      'Unique: `agent-loop.ts`; root: `README.md`; see [the wire](protocol.md#stop-reasons) and [gone](missing.md).',
      'Not paths: `tool/call`, `run/event`, `<stateDir>/sessions/<id>.jsonl`, `/bin/sh`, `test/*.e2e.ts`, `daemon/providers/NAME/index.ts`, `../../protocol/index.js`, `runs.jsonl`, `https://api.deepseek.com`.',
      '```',
      'not/read/inside/a/fence.ts',
      '`fenced/file.ts`',
      '```',
    ].join('\n');
    expect(brokenPaths(REPO, 'docs/example.md', page, names)).toEqual([
      'docs/example.md:2: session/session-log.ts does not exist',
      'docs/example.md:2: daemon/gone does not exist',
      'docs/example.md:2: no file is named nowhere.ts',
      expect.stringMatching(/^docs\/example\.md:2: \d+ files are named config\.ts; write the whole path$/),
      'docs/example.md:3: docs/missing.md does not exist',
    ]);
  });
});
