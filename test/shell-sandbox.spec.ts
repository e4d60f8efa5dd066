/**
 * `run_shell` in the bubblewrap sandbox: the workspace is writable, the rest of the filesystem
 * is not, the network is off unless the policy allows it, and the daemon's processes are out of
 * sight. Under CI=true a missing (or unusable) bwrap fails this file: CI must test the sandbox.
 * Elsewhere, without bwrap, it checks the fallback says it is not sandboxed.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findWorkingBwrap } from '../daemon/agent/tools/shell-sandbox.js';
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
      expect((await run('true')).text).toMatch(/not sandboxed/);
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
