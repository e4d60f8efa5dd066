/**
 * The tree's import rules, checked from the source (test/import-rules.spec.ts runs this in CI):
 * - `protocol/` imports nothing of ours; `common/` only `protocol/`;
 * - `client/` and `daemon/` never import each other (nor `cli/`, the faces, the harness or the tool);
 * - a provider never imports another provider;
 * - no import cycles between modules (type-only imports included: a cycle is a design smell even
 *   when erased at run time).
 * Only relative specifiers are ours; packages and `node:` builtins are not checked here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

export interface ImportEdge {
  readonly from: string;
  readonly to: string;
}

/** Which top-level rooms each room may import (itself always allowed). */
const ALLOWED: Record<string, readonly string[]> = {
  protocol: [],
  common: ['protocol'],
  // The model-facing tool is written against the seam only, so both sides mount it.
  tool: ['protocol', 'common'],
  client: ['protocol', 'common', 'tool'],
  daemon: ['protocol', 'common', 'tool'],
  harness: ['protocol', 'common', 'client', 'tool'],
  faces: ['protocol', 'common', 'client', 'tool'],
  cli: ['protocol', 'common', 'client', 'daemon', 'faces', 'tool'],
};

const SPECIFIER = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** Every relative import of every source module under `rooms`, as repo-relative .ts paths. */
export function collectImports(root: string, rooms: readonly string[] = Object.keys(ALLOWED)): ImportEdge[] {
  const edges: ImportEdge[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const text = readFileSync(join(root, path), 'utf8');
        for (const match of text.matchAll(SPECIFIER)) {
          const spec = (match[1] ?? match[2])!;
          edges.push({ from: path, to: normalize(join(dirname(path), spec)).replace(/\.js$/, '.ts') });
        }
      }
    }
  };
  for (const room of rooms) walk(room);
  return edges;
}

const roomOf = (path: string): string => path.split('/')[0]!;
const providerOf = (path: string): string | undefined => /^daemon\/providers\/([^/]+)\//.exec(path)?.[1];

/** One line per broken rule; empty when the tree is clean. */
export function importViolations(edges: readonly ImportEdge[]): string[] {
  const problems: string[] = [];
  for (const { from, to } of edges) {
    const [a, b] = [roomOf(from), roomOf(to)];
    if (a !== b && !(ALLOWED[a] ?? []).includes(b)) problems.push(`${from} imports ${to}: ${a}/ may import only ${(ALLOWED[a] ?? []).join(', ') || 'itself'}`);
    const [pa, pb] = [providerOf(from), providerOf(to)];
    if (pa && pb && pa !== pb) problems.push(`${from} imports ${to}: providers never import each other`);
  }
  return problems.concat(cycles(edges).map((cycle) => `import cycle: ${cycle.join(' -> ')}`));
}

/** Strongly connected components of more than one module (Tarjan), each as a path. */
function cycles(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) found.push(component.reverse());
    }
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return found;
}

export const relativeTo = (root: string, path: string): string => relative(root, path);
