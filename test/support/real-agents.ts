/**
 * Real third-party agents for the faces' real-agent tests, installed from the npm registry into
 * a cache under $TMPDIR keyed by package and version, so only the first run pays for the
 * install. An install goes to a private directory first and is renamed into place, so two test
 * processes never see half an install. An install that fails fails the test: these never skip.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CACHE_ROOT = join(process.env['TMPDIR'] ?? tmpdir(), 'subagentd-real-agents');

export interface CachedPackage {
  /** The directory whose node_modules holds the package. */
  readonly dir: string;
  /** The package's own directory. */
  readonly packageDir: string;
  /** Whether this call installed it (cold) or found it (warm). */
  readonly installed: boolean;
  readonly ms: number;
}

function installedVersion(packageDir: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

function npm(args: string[], cwd: string, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    // npm from PATH runs under the node on PATH: the Node 22 that CI puts there.
    const child = spawn('npm', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false' } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * `npm i -E name@version --omit=optional` into the cache, unless that version is there already.
 * `optional: true` keeps optional dependencies: a package that ships its binary as a platform
 * package (codex-acp) needs them.
 */
export async function installCached(name: string, version: string, timeoutMs = 240_000, options: { optional?: boolean } = {}): Promise<CachedPackage> {
  const started = performance.now();
  const dir = join(CACHE_ROOT, `${name.replace('/', '+')}@${version}`);
  const packageDir = join(dir, 'node_modules', name);
  if (installedVersion(packageDir) === version) return { dir, packageDir, installed: false, ms: performance.now() - started };
  const staging = `${dir}.staging-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  writeFileSync(join(staging, 'package.json'), JSON.stringify({ name: 'real-agent-cache', private: true }));
  const result = await npm(['install', '--no-save', ...(options.optional === true ? [] : ['--omit=optional']), '-E', `${name}@${version}`], staging, timeoutMs);
  if (result.code !== 0 || installedVersion(join(staging, 'node_modules', name)) !== version) {
    rmSync(staging, { recursive: true, force: true });
    throw new Error(`cannot install ${name}@${version} (npm exit ${result.code}):\n${result.output.slice(-2000)}`);
  }
  if (installedVersion(packageDir) !== version) {
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
  } else {
    rmSync(staging, { recursive: true, force: true });
  }
  return { dir, packageDir, installed: true, ms: performance.now() - started };
}

/**
 * Writes `<home>/.qwen/settings.json` for an offline Qwen Code: OpenAI-compatible auth (the fake
 * model), no usage statistics, telemetry or update checks; `extra` adds keys (e.g. `mcpServers`).
 */
export function writeQwenSettings(home: string, extra: Record<string, unknown> = {}): void {
  mkdirSync(join(home, '.qwen'), { recursive: true });
  writeFileSync(
    join(home, '.qwen', 'settings.json'),
    JSON.stringify({
      security: { auth: { selectedType: 'openai' } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      ...extra,
    }),
  );
}
