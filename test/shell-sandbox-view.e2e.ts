/**
 * The shell sandbox from inside, against a real daemon and real bwrap: a `run_shell` command
 * looks for the daemon by every path it can think of and for the user's secrets, and finds
 * nothing. The fake home lives under /var/tmp, not /tmp: a private /tmp alone must not be what
 * hides it (a real home is not under /tmp). The daemon keeps its socket in $XDG_RUNTIME_DIR and
 * its state, env file and config in the home, where a user's install puts them.
 *
 * Then the refusal: in a place where bwrap cannot create namespaces (the daemon itself run in a
 * bwrap with user namespaces disabled and no capabilities), `tools.shell: true` does not start,
 * saying why in one line; `tools.shellUnsandboxed: true` starts, and status says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { socketAccepts } from '../common/socket-probe.js';
import { findWorkingBwrap } from '../daemon/sandbox/bwrap.js';
import { chunk, textResponse, type ScriptedResponse } from './support/chat-completions-server.js';
import { CLI, waitFor } from './support/daemon-process.js';
import { ClientPool, RunPool } from './support/e2e-daemon.js';
import { contentText, ModelServer, type WireMessage } from './support/e2e-model-server.js';

const bwrap = await findWorkingBwrap();
let server: ModelServer;
const clients = new ClientPool();
const runs = new RunPool();
const started: ChildProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  server = await ModelServer.start();
});
afterEach(async () => {
  await Promise.all(started.splice(0).map(stopProcess));
  await runs.disposeAll();
  await clients.closeAll();
});
afterAll(async () => {
  await server?.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stopProcess(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGTERM');
  const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  return exited.finally(() => clearTimeout(killer));
}

/** A user's layout under /var/tmp: home with keys, runtime dir, state dir, config, env file. */
function layout(tools: Record<string, unknown>) {
  const base = mkdtempSync('/var/tmp/subagentd-view-');
  dirs.push(base);
  const home = join(base, 'home');
  const runtime = join(base, 'run');
  const stateDir = join(home, '.local', 'state', 'subagentd');
  const socket = join(runtime, 'subagentd', 'daemon.sock');
  const configDir = join(home, '.config', 'subagentd');
  const project = join(home, 'project');
  for (const dir of [join(home, '.ssh'), join(runtime, 'subagentd'), stateDir, configDir, project]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(base, 0o700);
  const sshKey = `FAKE-SSH-KEY-${randomBytes(8).toString('hex')}`;
  const envSecret = `ENV-FILE-SECRET-${randomBytes(8).toString('hex')}`;
  writeFileSync(join(home, '.ssh', 'id_ed25519'), `${sshKey}\n`, { mode: 0o600 });
  writeFileSync(join(stateDir, 'daemon.env'), `SOME_API_KEY=${envSecret}\n`, { mode: 0o600 });
  const configPath = join(configDir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ model: { baseUrl: server.baseUrl, apiKeyEnv: 'SOME_API_KEY', default: 'test-model', maxRetries: 0 }, tools }));
  // Doors a command might try from the workspace: links to the socket, the token, the runtime dir, the keys.
  symlinkSync(socket, join(project, 'sock-link'));
  symlinkSync(`${socket}.token`, join(project, 'token-link'));
  symlinkSync(runtime, join(project, 'run-link'));
  symlinkSync(join(home, '.ssh'), join(project, 'ssh-link'));
  symlinkSync(stateDir, join(project, 'state-link'));
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, XDG_RUNTIME_DIR: runtime, LANG: 'C.UTF-8' };
  const args = [CLI, 'daemon', '--socket', socket, '--state-dir', stateDir, '--config', configPath];
  return { base, home, runtime, stateDir, socket, configPath, project, sshKey, envSecret, env, args };
}

type Layout = ReturnType<typeof layout>;

/** Starts the daemon (optionally under a wrapper command) and waits until it accepts. */
async function startIn(place: Layout, wrapper: string[] = []): Promise<{ proc: ChildProcess; stderr: () => string }> {
  const [file, ...rest] = [...wrapper, process.execPath, ...place.args];
  const proc = spawn(file!, rest, { env: place.env, stdio: ['ignore', 'ignore', 'pipe'] });
  started.push(proc);
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await waitFor(() => existsSync(`${place.socket}.token`) || proc.exitCode !== null, 20_000, () => `daemon to listen: ${stderr}`);
  while (proc.exitCode === null && !(await socketAccepts(place.socket))) await new Promise((resolve) => setTimeout(resolve, 20));
  return { proc, stderr: () => stderr };
}

/** What the probe looks at: every way to the socket, the token and the keys it could name. */
function probeScript(place: Layout, daemonPid: number, token: string): string {
  const { socket, runtime, stateDir, project, home, configPath } = place;
  const sockets = [
    socket,
    `${project}/sock-link`,
    `${project}/run-link/subagentd/daemon.sock`,
    `${project}/state-link/../../../../run/subagentd/daemon.sock`,
    `/proc/${daemonPid}/root${socket}`,
    `/proc/1/root${socket}`,
  ];
  const files = [
    `${socket}.token`,
    `${project}/token-link`,
    `${project}/run-link/subagentd/daemon.sock.token`,
    `/proc/${daemonPid}/root${socket}.token`,
    `${stateDir}/daemon.env`,
    `${project}/state-link/daemon.env`,
    configPath,
    `${home}/.ssh/id_ed25519`,
    `${project}/ssh-link/id_ed25519`,
    `${project}/../.ssh/id_ed25519`,
    `/proc/${daemonPid}/root${home}/.ssh/id_ed25519`,
    `/proc/${daemonPid}/environ`,
  ];
  const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  const connect = `import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ntry:\n  s.connect(sys.argv[1]); print('CONNECTED', sys.argv[1])\nexcept Exception: pass`;
  const prune = `\\( -path /proc -o -path /sys -o -path /dev -o -path /usr \\) -prune -o`;
  return [
    `for p in ${sockets.map(q).join(' ')}; do /usr/bin/python3 -c ${q(connect)} "$p"; done`,
    `for f in ${files.map(q).join(' ')}; do cat "$f" 2>/dev/null; done`,
    // Then every socket, and every file holding one of the secrets, that the command can see at all
    // (bounded: where the whole machine is visible, as without this sandbox, the scan is cut short).
    `timeout 20 find / ${prune} -type s -print 2>/dev/null | while read -r p; do /usr/bin/python3 -c ${q(connect)} "$p"; done`,
    `timeout 20 find / ${prune} -type f -print0 2>/dev/null | timeout 20 xargs -0 grep -l -F -e ${q(token)} -e ${q(place.sshKey)} -e ${q(place.envSecret)} 2>/dev/null | sed 's/^/FOUND /'`,
    `ls -a ${q(home)} ${q(runtime)} 2>&1 | head -20`,
    'echo probe-done',
  ].join('\n');
}

const shellCall = (command: string): ScriptedResponse => ({
  type: 'stream',
  steps: [
    { data: chunk({ role: 'assistant', content: '' }) },
    { data: chunk({ tool_calls: [{ index: 0, id: 'call_probe', type: 'function', function: { name: 'run_shell', arguments: JSON.stringify({ command }) } }] }) },
    { data: chunk({}, { finish_reason: 'tool_calls' }) },
    { done: true },
  ],
});

describe('the shell sandbox seen from inside', () => {
  it('has a working bwrap to test (apt-get install -y bubblewrap)', () => {
    expect(bwrap).toBeDefined();
  });

  it(
    'reaches neither the daemon socket, nor a token, nor the env file, nor ~/.ssh, by any path, from the project or from the home itself',
    async () => {
      const place = layout({ shell: true });
      const { proc } = await startIn(place);
      const token = readFileSync(`${place.socket}.token`, 'utf8').trim();
      const service = await clients.connect(place.socket);
      expect((await service.ops.status()).shell).toBe('sandboxed');
      // The workspace as a project in the home, and as the home itself (the keys, the state dir
      // and the socket's folder then lie inside the writable workspace and must be masked there).
      for (const cwd of [place.project, place.home]) {
        await server.beginTest();
        server.enqueue(shellCall(probeScript(place, proc.pid!, token)), textResponse(['done']));
        const run = runs.track(
          await service.start('spawn', { prompt: [{ type: 'text', text: 'probe' }], parent: { sessionId: 'probe', cwd }, signal: new AbortController().signal }),
        );
        expect((await run.result).stopReason).toBe('completed');
        const output = contentText((server.messages(1) as WireMessage[]).find((m) => m.role === 'tool'));
        expect(output).toContain('probe-done');
        expect(output).toContain('sandboxed: only the workspace is writable');
        expect(output).not.toContain('CONNECTED');
        expect(output).not.toContain('FOUND');
        expect(output).not.toContain(token);
        expect(output).not.toContain(place.sshKey);
        expect(output).not.toContain(place.envSecret);
        expect(output).not.toContain('id_ed25519');
        expect(output).not.toContain('daemon.sock');
      }
      // The daemon was never driven from inside: it still runs, and only this test's client came.
      expect(proc.exitCode).toBeNull();
      expect((await service.ops.status()).connections).toBe(1);
    },
    60_000,
  );
});

describe('no sandbox, no shell', () => {
  /** The daemon run where bwrap cannot create namespaces: no user namespaces, no capabilities. */
  const noNamespaces = (): string[] => [bwrap ?? '/usr/bin/bwrap', '--unshare-user', '--disable-userns', '--cap-drop', 'ALL', '--die-with-parent', '--dev-bind', '/', '/', '--'];

  it(
    'tools.shell refuses to start the daemon with one line saying why, where bwrap cannot work',
    async () => {
      const place = layout({ shell: true });
      const { proc, stderr } = await startIn(place, noNamespaces());
      await waitFor(() => proc.exitCode !== null, 20_000, () => 'the daemon to exit');
      expect(proc.exitCode).not.toBe(0);
      const lines = stderr().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/tools\.shell needs the bubblewrap sandbox, and \/usr\/bin\/bwrap cannot build a sandbox here: .+; .*tools\.shellUnsandboxed: true/);
      expect(existsSync(place.socket)).toBe(false);
    },
    60_000,
  );

  it(
    'tools.shellUnsandboxed: true starts it there, and status says shell: unsandboxed',
    async () => {
      const place = layout({ shell: true, shellUnsandboxed: true });
      const { proc } = await startIn(place, noNamespaces());
      expect(proc.exitCode).toBeNull();
      const status = spawn(process.execPath, [CLI, 'status', '--socket', place.socket], { env: place.env, stdio: ['ignore', 'pipe', 'pipe'] });
      started.push(status);
      let out = '';
      status.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((resolve) => status.once('close', resolve));
      expect(code).toBe(0);
      expect(out).toMatch(/^\s*shell\s+unsandboxed\b/m);
    },
    60_000,
  );
});
