/**
 * `run_shell` in the bubblewrap sandbox: the workspace is writable, the rest of the filesystem
 * is not, the network is off unless the policy allows it, and the daemon's processes are out of
 * sight. Under CI=true a missing (or unusable) bwrap fails this file: CI must test the sandbox.
 * Elsewhere, without bwrap, it checks that the command is refused rather than run unsandboxed.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findWorkingBwrap } from '../daemon/sandbox/bwrap.js';
import { sandboxArgs, SandboxRefusal, type SandboxView } from '../daemon/sandbox/sandbox-view.js';
import { ToolRegistry } from '../daemon/agent/tools/tool-registry.js';
import { workspaceTools } from '../daemon/agent/tools/workspace-tools.js';
import { Workspace } from '../daemon/workspace/workspace.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
const bwrap = await findWorkingBwrap();
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function shell(network: boolean) {
  const root = await tempDir('sandbox-ws-');
  const registry = new ToolRegistry(workspaceTools(await Workspace.open(root), { write: false, shell: true, shellNetwork: network }, {}));
  const run = async (command: string) => {
    const outcome = await registry.invoke({ id: 'c', name: 'run_shell', arguments: JSON.stringify({ command }) }, { callId: 'c', signal: new AbortController().signal });
    return { isError: outcome.isError, text: outcome.content.map((b) => (b.type === 'text' ? b.text : '')).join('') };
  };
  return { root, run };
}

/** A loopback server on this side; the command's exit code says whether it could connect. */
async function connectCommand(): Promise<string> {
  const server = createServer((socket) => socket.end());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  // bash's /dev/tcp: Node itself may live under /tmp, which the sandbox replaces.
  return `/bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null && (exit 0) || (exit 7)`;
}

describe('run_shell sandbox', () => {
  it('is present wherever CI runs', () => {
    if (process.env['CI'] === 'true') expect(bwrap, 'CI=true needs a working bwrap (apt-get install -y bubblewrap)').toBeDefined();
    else expect(bwrap === undefined || existsSync(bwrap)).toBe(true);
  });

  it('keeps writes inside the workspace, hides the daemon, and has no network by default', async () => {
    const outside = await tempDir('sandbox-out-');
    const { root, run } = await shell(false);
    if (bwrap === undefined) {
      expect((await run('true')).text).toMatch(/run_shell refused: tools.shell needs the bubblewrap sandbox/);
      return;
    }
    process.env['SUBAGENTD_SANDBOX_SECRET'] = 'daemon-secret';
    try {
      const out = await run(
        `echo made > made.txt; echo planted > ${outside}/planted.txt; echo "outside=$?"; ` +
          `grep -l daemon-secret /proc/*/environ 2>/dev/null | wc -l; ${await connectCommand()}; echo "net=$?"`,
      );
      expect(out.text).toMatch(/sandboxed: only the workspace is writable/);
      expect(await readFile(join(root, 'made.txt'), 'utf8')).toBe('made\n');
      // /tmp is private in the sandbox: the write landed there and vanished with it.
      expect(existsSync(join(outside, 'planted.txt'))).toBe(false);
      const lines = out.text.split('\n');
      expect(lines).toContain('0');
      expect(lines).toContain('net=7');
      const readOnly = await run('echo x > /etc/subagentd-planted');
      expect(readOnly.isError).toBe(true);
      expect(readOnly.text).toMatch(/Read-only file system/);
      expect(existsSync('/etc/subagentd-planted')).toBe(false);
    } finally {
      delete process.env['SUBAGENTD_SANDBOX_SECRET'];
    }
  });

  it('lets the command reach the network when the policy allows it', async () => {
    const { run } = await shell(true);
    const out = await run(`${await connectCommand()}; echo "net=$?"`);
    expect(out.text.split('\n')).toContain('net=0');
  });
});

describe('the view around a workspace inside a hidden folder', () => {
  /** Runs `command` in the sandbox of `view` with `workspace`; its stdout, or the refusal. */
  async function inView(view: SandboxView, workspace: string, command: string): Promise<string> {
    const { spawnSync } = await import('node:child_process');
    const args = sandboxArgs(view, workspace);
    const result = spawnSync(bwrap!, [...args, '--', '/bin/sh', '-c', command], { encoding: 'utf8', timeout: 20_000 });
    return `${result.stdout}${result.stderr}`;
  }

  it('shows a worktree under the state dir, and nothing else of the state dir; refuses any other workspace in it', async () => {
    expect(bwrap).toBeDefined();
    const stateDir = await tempDir('sandbox-state-');
    const readOnly = await tempDir('sandbox-ro-');
    await mkdir(join(stateDir, 'worktrees', 'w1'), { recursive: true });
    await mkdir(join(stateDir, 'sessions'));
    await writeFile(join(stateDir, 'daemon.env'), 'KEY=state-secret\n');
    // The state dir made visible on purpose (a read-only path holding it): the mask still wins.
    const view: SandboxView = { readOnly: [stateDir, readOnly], hidden: [stateDir], network: false, workspaceAreas: [join(stateDir, 'worktrees')] };
    const workspace = join(stateDir, 'worktrees', 'w1');
    const out = await inView(view, workspace, `echo made > made.txt; cat ${stateDir}/daemon.env; ls -a ${stateDir}; echo end`);
    expect(await readFile(join(workspace, 'made.txt'), 'utf8')).toBe('made\n');
    expect(out).not.toContain('state-secret');
    expect(out).not.toContain('sessions');
    expect(out).toContain('end');
    expect(() => sandboxArgs(view, join(stateDir, 'sessions'))).toThrow(SandboxRefusal);
    expect(() => sandboxArgs(view, join(stateDir, 'worktrees'))).toThrow(/lies inside/);
  });

  it("binds a worktree workspace's main git dir read-only so git works, unless a hidden path holds it; masks inside it still win", async () => {
    expect(bwrap).toBeDefined();
    const { execFileSync } = await import('node:child_process');
    const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });
    const repo = await tempDir('sandbox-repo-');
    git(repo, 'init', '-q', '-b', 'main');
    await writeFile(join(repo, 'a.txt'), 'one\n');
    git(repo, 'add', '-A');
    git(repo, 'commit', '-q', '-m', 'initial');
    const workspace = join(await tempDir('sandbox-wt-'), 'w');
    git(repo, 'worktree', 'add', '-q', '-b', 'child', workspace);
    await writeFile(join(repo, '.git', 'secret-token'), 'git-secret\n');
    await writeFile(join(workspace, 'a.txt'), 'two\n');
    const common = join(repo, '.git');
    const probe = `git status --porcelain; git diff --stat; cat ${common}/secret-token; touch ${common}/written && echo wrote; ls ${repo}; echo end`;

    const shown = await inView({ readOnly: [], hidden: [join(common, 'secret-token')], network: false }, workspace, probe);
    expect(shown).toContain(' M a.txt');
    expect(shown).toContain('1 file changed');
    expect(shown).not.toContain('git-secret');
    expect(shown).not.toContain('wrote');
    expect(existsSync(join(common, 'written'))).toBe(false);
    // Only the git dir is shown, not the parent's work tree.
    expect(shown).not.toMatch(/^a\.txt$/m);
    expect(shown).toContain('end');

    const hiddenRepo = await inView({ readOnly: [], hidden: [repo], network: false }, workspace, probe);
    expect(hiddenRepo).toContain('not a git repository');
    expect(hiddenRepo).not.toContain('git-secret');
    expect(hiddenRepo).toContain('end');
  });
});
