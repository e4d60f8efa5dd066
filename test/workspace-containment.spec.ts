/**
 * Workspace containment (daemon/workspace), through both of its callers: the agent's file
 * tools and the ACP `fs/*` adapter. Real files, real symlinks, hard links and FIFOs; the race
 * test swaps a real directory for a symlink from another process while files are written.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { link, mkdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WorkspaceFs } from '../daemon/providers/acp/workspace-fs.js';
import { ToolRegistry } from '../daemon/agent/tools/tool-registry.js';
import { workspaceTools } from '../daemon/agent/tools/workspace-tools.js';
import { WorkspaceError } from '../daemon/workspace/workspace-error.js';
import { Workspace, withFile } from '../daemon/workspace/workspace.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();

async function dirs(): Promise<{ root: string; outside: string }> {
  return { root: await tempDir('ws-root-'), outside: await tempDir('ws-out-') };
}

const kindOf = (promise: Promise<unknown>): Promise<string | undefined> =>
  promise.then(
    () => undefined,
    (error: unknown) => (error instanceof WorkspaceError ? error.kind : `unexpected ${String(error)}`),
  );

async function tools(root: string) {
  const registry = new ToolRegistry(workspaceTools(await Workspace.open(root), { write: true, shell: false }, {}));
  let n = 0;
  return async (name: string, args: unknown) => {
    const outcome = await registry.invoke({ id: `c${++n}`, name, arguments: JSON.stringify(args) }, { callId: 'x', signal: new AbortController().signal });
    return { isError: outcome.isError, text: outcome.content.map((b) => (b.type === 'text' ? b.text : '')).join('') };
  };
}

describe('Workspace', () => {
  it('refuses .., absolute paths and symlinks that lead outside, for every open mode', async () => {
    const { root, outside } = await dirs();
    await writeFile(join(outside, 'secret.txt'), 'secret');
    await symlink(join(outside, 'secret.txt'), join(root, 'to-secret'));
    await symlink(outside, join(root, 'to-outside'));
    const ws = await Workspace.open(root);
    for (const path of ['../x.txt', join(outside, 'secret.txt'), 'to-secret', 'to-outside/secret.txt', 'to-outside/new.txt', 'a/../../x']) {
      for (const mode of ['read', 'update', 'create'] as const) {
        expect(await kindOf(ws.openFile(path, mode)), `${mode} ${path}`).toBe('outside-root');
      }
    }
    expect(await kindOf(ws.listDirectory('to-outside'))).toBe('outside-root');
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    expect(existsSync(join(outside, 'new.txt'))).toBe(false);
  });

  it('follows a symlink whose target stays inside, and reports the real path', async () => {
    const { root } = await dirs();
    await mkdir(join(root, 'real'));
    await writeFile(join(root, 'real', 'f.txt'), 'inside');
    await symlink(join(root, 'real', 'f.txt'), join(root, 'alias'));
    const ws = await Workspace.open(root);
    expect(await withFile(ws, 'alias', 'read', async (file) => [ws.display(file.real), (await file.readHead(100)).bytes.toString()])).toEqual([
      'real/f.txt',
      'inside',
    ]);
  });

  it('opens only regular files: a FIFO or a directory is refused at once, never opened for reading', async () => {
    const { root } = await dirs();
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const ws = await Workspace.open(root);
    for (const mode of ['read', 'update', 'create'] as const) {
      expect(await kindOf(ws.openFile('pipe', mode)), mode).toBe('not-a-file');
      expect(await kindOf(ws.openFile('.', mode)), mode).toBe('not-a-file');
    }
    expect(await kindOf(ws.openFile('/dev/null', 'read'))).toBe('outside-root');
    expect(await kindOf(ws.listDirectory('pipe'))).toBe('not-a-directory');
  });

  it('never writes through a hard link, and reads one only when every link is inside', async () => {
    const { root, outside } = await dirs();
    await writeFile(join(outside, 'victim.txt'), 'outside data');
    await link(join(outside, 'victim.txt'), join(root, 'linked.txt'));
    await writeFile(join(root, 'twin-a.txt'), 'both names inside');
    await link(join(root, 'twin-a.txt'), join(root, 'twin-b.txt'));
    const call = await tools(root);

    const read = await call('read_file', { path: 'linked.txt' });
    expect(read.isError).toBe(true);
    expect(read.text).toMatch(/2 hard links/);
    expect(read.text).not.toContain('outside data');
    for (const [name, args] of [
      ['write_file', { path: 'linked.txt', content: 'overwritten' }],
      ['edit_file', { path: 'linked.txt', oldText: 'outside', newText: 'changed' }],
      ['write_file', { path: 'twin-a.txt', content: 'overwritten' }],
    ] as const) {
      const outcome = await call(name, args);
      expect(outcome.isError, name).toBe(true);
      expect(outcome.text, name).toMatch(/hard links/);
    }
    // Nothing was truncated before the refusal.
    expect(await readFile(join(outside, 'victim.txt'), 'utf8')).toBe('outside data');
    expect(await readFile(join(root, 'twin-a.txt'), 'utf8')).toBe('both names inside');
    expect(await call('read_file', { path: 'twin-b.txt' })).toEqual({ isError: false, text: 'both names inside' });
    expect((await call('search_text', { query: 'data' })).text).toBe('no matches');
  });

  it('creates missing folders only inside, and checks before it empties a file', async () => {
    const { root, outside } = await dirs();
    const ws = await Workspace.open(root);
    await withFile(ws, 'a/b/c.txt', 'create', (file) => file.replace('new'));
    expect(await readFile(join(root, 'a/b/c.txt'), 'utf8')).toBe('new');
    await symlink(outside, join(root, 'a', 'escape'));
    expect(await kindOf(ws.openFile('a/escape/d/e.txt', 'create'))).toBe('outside-root');
    expect(existsSync(join(outside, 'd'))).toBe(false);
  });

  it('reads at most the bound asked for, whatever the file grew to after it was opened', async () => {
    const { root } = await dirs();
    await writeFile(join(root, 'f.txt'), 'abc');
    const ws = await Workspace.open(root);
    await withFile(ws, 'f.txt', 'read', async (file) => {
      expect(file.size).toBe(3);
      await writeFile(join(root, 'f.txt'), 'x'.repeat(100));
      const head = await file.readHead(10);
      expect([head.bytes.toString(), head.truncated]).toEqual(['x'.repeat(10), true]);
      expect(await kindOf(file.readText(50, 'f.txt'))).toBe('too-large');
      expect((await file.readText(100, 'f.txt')).length).toBe(100);
    });
  });

  it('holds while another process swaps a folder for a symlink to outside (a path changed after the check)', async () => {
    const { root, outside } = await dirs();
    await writeFile(join(outside, 'f.txt'), 'outside original');
    await mkdir(join(root, 'real'));
    await writeFile(join(root, 'real', 'f.txt'), 'inside');
    await symlink(outside, join(root, 'evil'));
    // `sub` flips between the real folder and the link to outside as fast as a process can rename.
    const swapper = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('node:fs'); const r = ${JSON.stringify(root)};
         for (;;) { fs.renameSync(r + '/real', r + '/sub'); fs.renameSync(r + '/sub', r + '/real');
                    fs.renameSync(r + '/evil', r + '/sub'); fs.renameSync(r + '/sub', r + '/evil'); }`,
      ],
      { stdio: 'ignore' },
    );
    try {
      const ws = await Workspace.open(root);
      const outcomes = new Map<string, number>();
      const seen = (kind: string): number => outcomes.get(kind) ?? 0;
      // Until both states were met many times (the swapper needs a moment to start), bounded.
      for (let i = 0; i < 5000 && (seen('ok') < 50 || seen('outside-root') < 50); i++) {
        const mode = i % 2 === 0 ? 'update' : 'read';
        const kind = (await kindOf(withFile(ws, 'sub/f.txt', mode, async (file) => (mode === 'update' ? file.replace('written') : undefined)))) ?? 'ok';
        outcomes.set(kind, seen(kind) + 1);
      }
      const kinds = JSON.stringify([...outcomes]);
      expect([...outcomes.keys()].every((k) => ['ok', 'not-found', 'not-a-directory', 'outside-root'].includes(k)), kinds).toBe(true);
      expect(seen('ok'), kinds).toBeGreaterThan(0);
      expect(await readFile(join(outside, 'f.txt'), 'utf8')).toBe('outside original');
    } finally {
      swapper.kill('SIGKILL');
      await new Promise((resolve) => swapper.once('exit', resolve));
    }
  });
});

describe('ACP fs/* through the workspace', () => {
  it('slices by 1-based line and line limit', async () => {
    const { root } = await dirs();
    await writeFile(join(root, 'f.txt'), 'a\nb\nc\nd');
    const fs = await WorkspaceFs.open(root);
    expect(await fs.readText(join(root, 'f.txt'), 2, 2)).toBe('b\nc');
    expect(await fs.readText(join(root, 'f.txt'), 3)).toBe('c\nd');
    expect(await fs.readText(join(root, 'f.txt'), null, 1)).toBe('a');
  });

  it('needs absolute paths and contains by real path, so a root reached through a symlink still works', async () => {
    const { root, outside } = await dirs();
    const viaLink = join(outside, 'root-link');
    await symlink(root, viaLink);
    await writeFile(join(root, 'f.txt'), 'x');
    const fs = await WorkspaceFs.open(viaLink);
    expect(await fs.readText(join(viaLink, 'f.txt'))).toBe('x');
    expect(await fs.readText(join(root, 'f.txt'))).toBe('x');
    expect(await kindOf(fs.readText('f.txt'))).toBe('invalid-path');
  });

  it('does not mistake a sibling with the root as prefix for the inside', async () => {
    const { root } = await dirs();
    const sibling = `${root}-sibling`;
    await writeFile(sibling, 'nope');
    try {
      const fs = await WorkspaceFs.open(root);
      expect(await kindOf(fs.readText(sibling))).toBe('outside-root');
    } finally {
      await rm(sibling, { force: true });
    }
  });

  it('refuses FIFOs, directories, hard links and dangling symlinks; writes only after the checks', async () => {
    const { root, outside } = await dirs();
    execFileSync('mkfifo', [join(root, 'pipe')]);
    await writeFile(join(outside, 'victim.txt'), 'keep me');
    await link(join(outside, 'victim.txt'), join(root, 'linked.txt'));
    await symlink(join(outside, 'will-be-created.txt'), join(root, 'dangling'));
    const fs = await WorkspaceFs.open(root);
    expect(await kindOf(fs.readText(join(root, 'pipe')))).toBe('not-a-file');
    expect(await kindOf(fs.readText(root))).toBe('not-a-file');
    expect(await kindOf(fs.writeText(join(root, 'pipe'), 'x'))).toBe('not-a-file');
    expect(await kindOf(fs.readText(join(root, 'linked.txt')))).toBe('hard-linked');
    expect(await kindOf(fs.writeText(join(root, 'linked.txt'), 'x'))).toBe('hard-linked');
    expect(await kindOf(fs.writeText(join(root, 'dangling'), 'x'))).toBe('invalid-path');
    expect(await readFile(join(outside, 'victim.txt'), 'utf8')).toBe('keep me');
    expect(existsSync(join(outside, 'will-be-created.txt'))).toBe(false);
    expect((await stat(join(root, 'pipe'))).isFIFO()).toBe(true);
  });
});
