/**
 * The command line as a CLI: --version, help for the whole command and per command (listing every
 * flag the parser accepts), usage errors exiting 2 in our words, --json errors as one object on
 * stdout, shell completion generated from the same table, and a closed stdout ending quietly.
 * None of these start a daemon.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliSandbox, cleanEnv, daemonPidsFor, MAIN, REPO } from './support/cli-harness.js';

const COMMANDS = ['run', 'daemon', 'start', 'stop', 'restart', 'cancel', 'reload', 'status', 'runs', 'inspect', 'logs', 'connect', 'mcp', 'acp', 'send', 'interrupt', 'children', 'gc', 'worktrees', 'ui', 'completion', 'help'];

describe('the CLI surface', () => {
  let box: CliSandbox;
  beforeAll(() => {
    box = new CliSandbox('subagentd-cli-usage-');
  });
  afterAll(async () => {
    expect(daemonPidsFor(box.socket)).toEqual([]);
    await box.cleanup();
  });

  it('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const [text, json] = await Promise.all([box.run(['--version']), box.run(['--version', '--json'])]);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(`subagentd ${version}\n`);
    expect(JSON.parse(json.stdout)).toEqual({ version });
  });

  it('the usage lists every command with its flags; help CMD and CMD --help list that command\'s flags', async () => {
    const [bare, help, helpStop, stopHelp] = await Promise.all([
      box.run([]),
      box.run(['help']),
      box.run(['help', 'stop']),
      box.run(['stop', '--help']),
    ]);
    expect(bare.code).toBe(2); // no command is a usage mistake
    expect(help.code).toBe(0);
    for (const name of COMMANDS) expect(help.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    for (const flag of ['--drain', '--timeout S', '--provider P', '--schema FILE', '--log-level LEVEL', '--follow', '--json', '--socket PATH']) {
      expect(help.stdout).toContain(flag);
    }
    expect(helpStop.code).toBe(0);
    expect(helpStop.stdout).toBe(stopHelp.stdout);
    expect(helpStop.stdout).toMatch(/^usage: subagentd stop \[options\]/);
    expect(helpStop.stdout).toContain('--drain');
    expect(helpStop.stdout).toContain('--timeout S');
    expect(helpStop.stdout).not.toContain('--provider');
  });

  it('usage errors exit 2 in our words, as JSON with --json', async () => {
    const [badFlag, noValue, unknown, noPrompt, badTimeout, jsonBadFlag] = await Promise.all([
      box.run(['run', '--bogus', 'hi']),
      box.run(['stop', '--timeout']),
      box.run(['frobnicate']),
      box.run(['run']),
      box.run(['stop', '--timeout', 'soon']),
      box.run(['status', '--json', '--bogus']),
    ]);
    for (const r of [badFlag, noValue, unknown, noPrompt, badTimeout, jsonBadFlag]) expect(r.code, r.stderr).toBe(2);
    expect(badFlag.stderr).toBe('subagentd: `run` has no flag --bogus; see `subagentd help run`\n');
    expect(noValue.stderr).toBe('subagentd: --timeout needs a value; see `subagentd help stop`\n');
    expect(unknown.stderr).toBe('subagentd: unknown command "frobnicate"; `subagentd help` lists them\n');
    expect(noPrompt.stderr).toContain('run needs a prompt');
    expect(badTimeout.stderr).toBe('subagentd: --timeout must be a number of seconds, got "soon"\n');
    for (const r of [badFlag, noValue, unknown]) expect(r.stderr).not.toContain('ERR_PARSE_ARGS');
    expect(jsonBadFlag.stderr).toBe('');
    expect(JSON.parse(jsonBadFlag.stdout)).toEqual({ error: { code: 'USAGE', message: '`status` has no flag --bogus; see `subagentd help status`' } });
  });

  it('completion scripts offer every command and its flags; an unknown shell is a usage error', async () => {
    const [bash, zsh, fish, bad] = await Promise.all([
      box.run(['completion', 'bash']),
      box.run(['completion', 'zsh']),
      box.run(['completion', 'fish']),
      box.run(['completion', 'tcsh']),
    ]);
    for (const r of [bash, zsh, fish]) expect(r.code).toBe(0);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('completion knows bash, zsh, fish');
    expect(spawnSync('bash', ['-n'], { input: bash.stdout }).status).toBe(0);
    // bash really completes: the commands after `subagentd `, stop's flags after `subagentd stop --`.
    const complete = (line: string): string[] => {
      const words = line.split(' ');
      const script = `${bash.stdout}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _subagentd; printf '%s\\n' "\${COMPREPLY[@]}"`;
      return spawnSync('bash', ['-c', script], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    };
    expect(complete('subagentd ').sort()).toEqual([...COMMANDS, '--help', '--version'].sort());
    expect(complete('subagentd stop --').sort()).toEqual(['--config', '--drain', '--help', '--json', '--socket', '--state-dir', '--timeout'].sort());
    expect(complete('subagentd completion ')).toEqual(['bash', 'zsh', 'fish']);
    for (const name of COMMANDS) {
      expect(zsh.stdout).toContain(`'${name}:`);
      expect(fish.stdout).toContain(`-a ${name} -d`);
    }
    expect(fish.stdout).toContain("-n '__fish_seen_subcommand_from stop' -l drain");
    expect(zsh.stdout).toContain('--drain[');
  });

  it('a reader that closes early (`| head -1`) ends the CLI quietly, exit 0', async () => {
    // help's output is several lines; the pipe closes after the first.
    const child = spawn('bash', ['-o', 'pipefail', '-c', `"${process.execPath}" "${MAIN}" completion fish | head -1 >/dev/null`], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
