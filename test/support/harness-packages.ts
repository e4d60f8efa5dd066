/**
 * The published deepseek-harness packages (library level), installed once into a cache under
 * $TMPDIR keyed by version, and a throwaway app directory that resolves both them and this
 * checkout as `subagentd`. The lane needs Node 22 (the packages use Promise.withResolvers and
 * zlib.zstdCompress); `.ci/run` provides it. Missing Node 22 or a failed install fails the tests:
 * they never skip.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from './daemon-process.js';

export const HARNESS_VERSION = '0.1.0-rc.8';
const PACKAGES = [
  '@deepseek-ai/cordis@4.0.4',
  ...['dsh-agent', 'dsh-agent-loop', 'dsh-llm', 'dsh-session', 'dsh-system-prompt', 'dsh-tools', 'dsh-subagent', 'dsh-tool-subagent'].map(
    (name) => `@deepseek-ai/${name}@${HARNESS_VERSION}`,
  ),
];

export function harnessCacheDir(): string {
  return join(process.env['TMPDIR'] || tmpdir(), 'subagentd-cache', `harness-${HARNESS_VERSION}`);
}

/** Installs the packages unless the cache has them; returns the cache's node_modules. */
export function ensureHarnessPackages(): string {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) throw new Error(`the harness lane needs Node 22+ (running ${process.version}); run \`source .ci/node22.sh\` first`);
  const cache = harnessCacheDir();
  const modules = join(cache, 'node_modules');
  if (existsSync(join(modules, '@deepseek-ai', 'dsh-tool-subagent', 'package.json'))) return modules;
  mkdirSync(join(cache, '..'), { recursive: true });
  const staging = mkdtempSync(`${cache}.staging-`);
  writeFileSync(join(staging, 'package.json'), JSON.stringify({ name: 'subagentd-harness-cache', private: true }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--save-exact', ...PACKAGES], { cwd: staging, stdio: 'pipe', timeout: 180_000 });
  try {
    renameSync(staging, cache);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another run filled the cache first
  }
  return modules;
}

/** A directory whose node_modules links every cached package plus this checkout as `subagentd`. */
export function makeHarnessAppDir(modules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-harness-app-'));
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(modules)) symlinkSync(join(modules, entry), join(dir, 'node_modules', entry));
  symlinkSync(REPO, join(dir, 'node_modules', 'subagentd'));
  return dir;
}

export interface HarnessAppOutput {
  readonly providers: string[];
  readonly childStarts: Array<{ runId: string; provider: string; id: string }>;
  readonly turns: Array<{ toolResults: Array<{ content: Array<{ type: string; text?: string }>; isError?: boolean }>; endReason?: string }>;
  readonly parentLog: unknown[];
  readonly log: Array<{ name: string; type: string; text: string }>;
}

/** Runs test/harness/harness-app.mjs with a scenario; resolves with its output, bounded in time. */
export function runHarnessApp(appDir: string, scenario: object, timeoutMs = 60_000): Promise<HarnessAppOutput> {
  const scenarioPath = join(mkdtempSync(join(appDir, 'scenario-')), 'scenario.json');
  writeFileSync(scenarioPath, JSON.stringify(scenario));
  const app = join(REPO, 'test', 'harness', 'harness-app.mjs');
  const copy = join(appDir, 'harness-app.mjs'); // bare imports resolve from the app dir
  if (!existsSync(copy)) symlinkSync(app, copy);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--preserve-symlinks-main', copy, scenarioPath], { cwd: appDir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`harness app exited ${code ?? signal}: ${err.slice(-2000)}`));
      try {
        resolve(JSON.parse(out) as HarnessAppOutput);
      } catch {
        reject(new Error(`harness app printed no result: ${out.slice(-500)} ${err.slice(-1000)}`));
      }
    });
  });
}

export const DSH_VERSION = '0.1.0-rc.8';
const PNPM_VERSION = '11.7.0';

/**
 * The published `dsh` product CLI, installed with pnpm into a cache keyed by version. rc.8 needs
 * `@deepseek-ai/cordis-plugin-hmr` pinned to 1.0.16 (pnpm `overrides`); plain npm does not finish
 * resolving it. Returns the `dsh` launcher script.
 */
export function ensureDshProduct(): string {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) throw new Error(`the dsh product test needs Node 22+ (running ${process.version}); run \`source .ci/node22.sh\` first`);
  const cache = join(process.env['TMPDIR'] || tmpdir(), 'subagentd-cache', `dsh-${DSH_VERSION}-pnpm-${PNPM_VERSION}`);
  const app = join(cache, 'app');
  const launcher = join(app, 'node_modules', '@deepseek-ai', 'dsh', 'lib', 'bin.js');
  if (!existsSync(launcher)) {
    mkdirSync(join(cache, 'pnpm'), { recursive: true });
    writeFileSync(join(cache, 'pnpm', 'package.json'), JSON.stringify({ private: true }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--save-exact', `pnpm@${PNPM_VERSION}`], { cwd: join(cache, 'pnpm'), stdio: 'pipe', timeout: 120_000 });
    mkdirSync(app, { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'dsh-app', private: true, dependencies: { '@deepseek-ai/dsh': DSH_VERSION } }));
    writeFileSync(join(app, 'pnpm-workspace.yaml'), 'overrides:\n  "@deepseek-ai/cordis-plugin-hmr": "1.0.16"\n');
    execFileSync(join(cache, 'pnpm', 'node_modules', '.bin', 'pnpm'), ['install', '--config.strict-dep-builds=false'], {
      cwd: app,
      stdio: 'pipe',
      timeout: 300_000,
    });
  }
  return launcher;
}

/**
 * A fresh `DSH_HOME` whose headless profile has this checkout installed as `subagentd` (dsh
 * resolves out-of-tree plugins from the profile's own node_modules, where `pnpm add` puts them).
 */
export function makeDshHome(parent: string): string {
  const dshHome = join(parent, 'dsh');
  const modules = join(dshHome, 'profiles', 'headless', 'node_modules');
  mkdirSync(modules, { recursive: true });
  symlinkSync(REPO, join(modules, 'subagentd'));
  return dshHome;
}
