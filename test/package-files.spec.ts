/**
 * What ships: package.json's engines, licence, bin and "files" (no tests or benchmarks), the
 * LICENSE file, and the Dockerfile's promises (Node 22, an init, a non-root user, only the packed
 * package in the runtime stage, a status health check). The Dockerfile cannot be built or linted
 * with hadolint here (no Docker engine; hadolint is on neither npm nor Debian), so its rules are
 * checked as text. The tarball itself is installed and run by .ci/package-smoke.sh.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from './support/cli-harness.js';

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  engines: { node: string };
  license: string;
  bin: Record<string, string>;
  files: string[];
};

describe('the package', () => {
  it('needs Node 22, is MIT with a LICENSE file, and ships the runtime, docs and examples only', () => {
    expect(pkg.engines.node).toBe('>=22');
    expect(pkg.license).toBe('MIT');
    expect(readFileSync(join(REPO, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n/);
    expect(pkg.bin).toEqual({ subagentd: 'dist/cli/main.js' });
    expect(pkg.files.sort()).toEqual(['!dist/bench', '!dist/test', 'LICENSE', 'README.md', 'dist', 'docs', 'examples']);
    for (const file of pkg.files.filter((f) => !f.startsWith('!') && f !== 'dist')) expect(existsSync(join(REPO, file)), file).toBe(true);
  });
});

describe('the Dockerfile', () => {
  const text = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
  const stages = text.split(/^FROM /m).slice(1);
  const runtime = stages.at(-1) ?? '';

  it('builds on Node 22 and runs the packed package as a non-root user under tini, with a status health check', () => {
    expect(stages).toHaveLength(2);
    for (const stage of stages) expect(stage).toMatch(/^node:22-bookworm-slim\b/);
    expect(runtime).toMatch(/apt-get install -y --no-install-recommends tini/);
    expect(runtime).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "subagentd"\]$/m);
    expect(runtime).toMatch(/^USER subagentd$/m);
    expect(runtime.indexOf('USER subagentd')).toBeLessThan(runtime.indexOf('ENTRYPOINT'));
    expect(runtime).toMatch(/^HEALTHCHECK .*\n\s+CMD \["subagentd", "status"\]$/m);
    // Only the tarball crosses from the build stage: no sources, tests, benchmarks or dev deps.
    expect(runtime.match(/^COPY .*$/gm)).toEqual(['COPY --from=build /tmp/subagentd.tgz /tmp/subagentd.tgz']);
    expect(runtime).toMatch(/npm i -g --omit=dev/);
  });
});

describe('the systemd unit', () => {
  const unit = readFileSync(join(REPO, 'examples', 'systemd', 'subagentd.service'), 'utf8');

  it('runs the daemon, reloads with SIGHUP and drains on stop', () => {
    expect(unit).toMatch(/^ExecStart=\/usr\/bin\/env subagentd daemon$/m);
    expect(unit).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
    expect(unit).toMatch(/^ExecStop=\/usr\/bin\/env subagentd stop --drain --timeout (\d+)$/m);
    // systemd must wait longer than the drain it asked for.
    const drain = Number(/--timeout (\d+)$/m.exec(unit)?.[1]);
    expect(Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1])).toBeGreaterThan(drain);
  });
});
