/**
 * What the daemon process pays at start: the built CLI's `daemon` command, a real process on a
 * real socket. It loads only the daemon's own code; the client side, the faces, the in-process
 * agent runtime (loop, tools, workspace), nested delegation and its tool, the model adapter and
 * its endpoint governor, the model and agent SDKs, the search engine, Ajv (the config file has a validator built ahead of time) and, outside
 * a cluster, the NATS client load when first used, and ICU's time-zone data is never asked for
 * (common/iso-time.ts). Node's compile cache goes on once the daemon accepts connections, for what
 * loads later (Node holds every entry in memory, and start-up's own ~1 MiB is not worth it), and
 * a cache dir that cannot be made costs nothing but the cache.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { socketAccepts } from '../common/socket-probe.js';
import { CLI, REPO } from './support/daemon-process.js';

const RECORDER = pathToFileURL(resolve(REPO, 'test', 'fixtures', 'load-recorder.mjs')).href;

let dir: string | undefined;
let child: ChildProcess | undefined;
afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
  child = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The environment without Node's own compile-cache switches, which would override ours. */
function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const { NODE_COMPILE_CACHE: _a, NODE_DISABLE_COMPILE_CACHE: _b, NODE_OPTIONS: _c, ...env } = process.env;
  return { ...env, ...extra };
}

/** Starts the daemon command on a fresh socket and resolves once it accepts a connection. */
async function startDaemon(env: NodeJS.ProcessEnv, nodeFlags: string[] = []): Promise<void> {
  dir ??= mkdtempSync(join(tmpdir(), 'subagentd-startup-'));
  const socket = join(dir, 'daemon.sock');
  const config = join(dir, 'config.json');
  writeFileSync(config, '{}');
  child = spawn(process.execPath, [...nodeFlags, CLI, 'daemon', '--socket', socket, '--state-dir', join(dir, 'state'), '--config', config], { stdio: 'ignore', env });
  const deadline = Date.now() + 20_000;
  while (!(existsSync(socket) && (await socketAccepts(socket)))) {
    if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('daemon did not accept connections within 20 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

it('loads only the daemon at start: no client side, faces, agent runtime, SDKs, search engine, Ajv, NATS client, ICU time zone, CommonJS export lexer, perf_hooks or lazy built-ins', async () => {
  dir = mkdtempSync(join(tmpdir(), 'subagentd-startup-'));
  const log = join(dir, 'loads.txt');
  await startDaemon(baseEnv({ SUBAGENTD_TEST_LOAD_LOG: log, XDG_CACHE_HOME: join(dir, 'cache') }), ['--import', RECORDER]);
  const loaded = readFileSync(log, 'utf8').trim().split('\n');
  // The recorder saw the daemon (else the absences below would prove nothing).
  expect(loaded.some((url) => url.endsWith('/dist/daemon/daemon.js'))).toBe(true);
  expect(loaded.some((url) => url.includes('/node_modules/vscode-jsonrpc/'))).toBe(true);
  const unwanted = [
    '/dist/client/',
    '/dist/faces/',
    '/dist/cli/ops-commands.js',
    '/dist/cli/run-command.js',
    '/dist/cli/children-commands.js',
    '/dist/cli/connect-command.js',
    '/node_modules/openai/',
    '/node_modules/@agentclientprotocol/',
    '/node_modules/@modelcontextprotocol/',
    '/node_modules/zod/',
    '/node_modules/re2js/',
    '/node_modules/@nats-io/',
    '/dist/daemon/cluster/',
    // The in-process agent runtime loads at the first child (in-process-runtime.ts).
    '/dist/daemon/agent/agent-loop.js',
    '/dist/daemon/agent/child-agent.js',
    '/dist/daemon/agent/tools/',
    '/dist/daemon/workspace/',
    // Nested delegation and its subagent tool load only when the config asks for them.
    '/dist/daemon/service/delegation.js',
    '/dist/tool/',
    // Metrics, traces and the web view load only when turned on (docs/observability.md).
    '/dist/daemon/telemetry/',
    '/dist/daemon/ui/',
    '/node_modules/prom-client/',
    '/node_modules/@opentelemetry/',
    // Token budgets load only when limits.lineageTokens or limits.clientTokensPerDay is set.
    '/dist/daemon/upstream/token-budgets.js',
    // The openai-compatible adapter and its endpoint's governor load when a child first resolves
    // that model (model-resolver.ts, upstream/upstream.ts).
    '/dist/daemon/agent/model/openai-compatible.js',
    '/dist/daemon/agent/model/chat-messages.js',
    '/dist/daemon/agent/model/chat-chunks.js',
    '/dist/daemon/agent/model/pausable-timer.js',
    '/dist/daemon/upstream/governor.js',
    '/dist/daemon/upstream/limit-state.js',
    '/dist/daemon/upstream/fair-queue.js',
    '/dist/daemon/upstream/endpoint-identity.js',
    '/dist/daemon/upstream/keep-alive-fetch.js',
  ];
  expect(loaded.filter((url) => unwanted.some((part) => url.includes(part)))).toEqual([]);
  // The config validator built ahead of time needs one of Ajv's small runtime helpers, not Ajv.
  expect(loaded.filter((url) => url.includes('/node_modules/ajv/') && !url.includes('/node_modules/ajv/dist/runtime/'))).toEqual([]);
  // No Date method that asks ICU for the time zone (timestamps come from common/iso-time.ts).
  expect(loaded.filter((line) => line.startsWith('date:'))).toEqual([]);
  // Node's built-ins, internal ones included, as the daemon accepts.
  child!.kill('SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (!readFileSync(log, 'utf8').includes('builtins:end\n')) {
    if (Date.now() > deadline) throw new Error('the load recorder did not list the built-ins within 10 s');
    await new Promise((r) => setTimeout(r, 10));
  }
  const builtins = readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith('builtin:'));
  expect(builtins).toContain('builtin:net');
  // CommonJS packages come in by require (protocol/jsonrpc-runtime.ts), so Node's export lexer never
  // loads; idle-memory.ts times and watches the loop without node:perf_hooks; no ES facade of
  // node:net, node:crypto, node:util or node:fs runs their lazy exports (common/node-builtins.ts);
  // and nothing takes node:fs/promises or node:timers/promises at load.
  const unwantedBuiltins =
    /cjs-module-lexer|perf_hooks|internal\/perf\/performance$|internal\/(blocklist|socketaddress|crypto\/webcrypto|util\/diff|util\/trace_sigint|fs\/promises|readline\/interface|fs\/watchers)$|builtin:timers\/promises$/;
  expect(builtins.filter((line) => unwantedBuiltins.test(line))).toEqual([]);
});

/** Stops the daemon the way `subagentd stop` does (SIGTERM: close, then exit), so Node writes its compile cache. */
async function stopDaemon(): Promise<void> {
  const exited = new Promise((r) => child!.once('exit', r));
  child!.kill('SIGTERM');
  await exited;
}

/** Files in a compile cache dir: one per compiled module, under a subdirectory per Node version and flags. */
function cacheEntries(cache: string): number {
  return readdirSync(cache, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length;
}

it('turns the compile cache on once it accepts: none of its start-up modules is cached, what loads later is', async () => {
  dir = mkdtempSync(join(tmpdir(), 'subagentd-startup-'));
  const cache = join(dir, 'cache', 'subagentd', 'node-compile-cache');
  const env = baseEnv({ XDG_CACHE_HOME: join(dir, 'cache') });
  await startDaemon(env);
  expect(existsSync(cache)).toBe(true);
  await stopDaemon();
  expect(cacheEntries(cache)).toBe(0);
  // A child loads the in-process runtime after the cache is on: those modules are cached.
  await startDaemon(env);
  const run = spawnSync(
    process.execPath,
    [CLI, 'run', '--quiet', '--socket', join(dir, 'daemon.sock'), '--model', `scripted:${join(REPO, 'examples', 'hello.json')}`, 'Summarise this repository'],
    { env: baseEnv({ XDG_CACHE_HOME: join(dir, 'client-cache') }), encoding: 'utf8', timeout: 20_000 },
  );
  expect(run.stdout).toContain('This repository is subagentd');
  await stopDaemon();
  expect(cacheEntries(cache)).toBeGreaterThan(10);
});

it('runs as usual when the compile cache dir cannot be created', () => {
  dir = mkdtempSync(join(tmpdir(), 'subagentd-startup-'));
  // A regular file where the cache's parent dir should be: mkdir fails even for root.
  const blocker = join(dir, 'not-a-dir');
  writeFileSync(blocker, '');
  const result = spawnSync(process.execPath, [CLI, '--version'], { env: baseEnv({ XDG_CACHE_HOME: blocker }), encoding: 'utf8', timeout: 20_000 });
  expect(result.stderr).toBe('');
  expect(result.stdout).toMatch(/^subagentd \d+\.\d+\.\d+\n$/);
  expect(result.status).toBe(0);
});
