/**
 * How `run_shell` starts a command: inside the bubblewrap sandbox (sandbox-view.ts), or — only
 * when the operator says `tools.shellUnsandboxed: true` — as plain `/bin/sh -c`. The choice is
 * made once, at daemon start (`prepareShell`): with `tools.shell` on and no working bwrap the
 * daemon refuses to start, naming why. One rule, one home: nothing else decides it.
 */
import { homedir } from 'node:os';
import { dirname } from 'node:path';
import { tokenPathFor } from '../../common/daemon-token.js';
import { defaultSocketPath } from '../../common/socket-path.js';
import { StartupError } from '../ops/startup-error.js';
import { defaultStateDir, stateFiles } from '../ops/paths.js';
import { probeBwrap } from './bwrap.js';
import { homeSecrets, sandboxArgs, SYSTEM_SECRETS, type SandboxView } from './sandbox-view.js';

export interface ShellLaunch {
  readonly file: string;
  readonly args: string[];
  /** Whether the command runs in the sandbox. */
  readonly sandboxed: boolean;
}

export interface ShellLauncher {
  readonly mode: 'sandboxed' | 'unsandboxed';
  /** The process to spawn for `command` in `workspace` (a real path); throws SandboxRefusal. */
  launch(command: string, workspace: string): Promise<ShellLaunch>;
}

/** Where this daemon keeps what a sandboxed command must never see. */
export interface DaemonPlaces {
  readonly stateDir: string;
  readonly socket?: string;
  readonly configPath?: string;
  readonly envFile?: string;
  readonly tcpTokenFile?: string;
  /** The daemon's environment: HOME and XDG_RUNTIME_DIR, and the default places it implies. */
  readonly env: NodeJS.ProcessEnv;
}

/** Every path the sandbox masks: the daemon's own, the user's keys, root's secrets. */
export function hiddenPaths(places: DaemonPlaces): string[] {
  const { env } = places;
  const home = env['HOME'] || homedir();
  const sockets = [places.socket, defaultSocketPath(env)].filter((s): s is string => s !== undefined);
  return [
    places.stateDir,
    defaultStateDir(env),
    ...sockets.flatMap((socket) => [dirname(socket), socket, tokenPathFor(socket)]),
    ...(env['XDG_RUNTIME_DIR'] ? [env['XDG_RUNTIME_DIR']] : []),
    ...[places.configPath, places.envFile, places.tcpTokenFile].filter((p): p is string => p !== undefined),
    ...homeSecrets(home),
    ...SYSTEM_SECRETS,
  ];
}

export const UNSANDBOXED: ShellLauncher = {
  mode: 'unsandboxed',
  launch: async (command) => ({ file: '/bin/sh', args: ['-c', command], sandboxed: false }),
};

export function sandboxedLauncher(bwrap: string, view: SandboxView): ShellLauncher {
  return {
    mode: 'sandboxed',
    launch: async (command, workspace) => ({ file: bwrap, args: [...sandboxArgs(view, workspace), '--', '/bin/sh', '-c', command], sandboxed: true }),
  };
}

export interface ShellSettings {
  readonly unsandboxed?: boolean;
  readonly readOnly?: readonly string[];
  readonly network?: boolean;
}

/** At daemon start, with `tools.shell` on: the launcher, or a StartupError saying why there is none. */
export async function prepareShell(settings: ShellSettings, places: DaemonPlaces): Promise<ShellLauncher> {
  if (settings.unsandboxed === true) return UNSANDBOXED;
  const probe = await probeBwrap();
  if (probe.bwrap === undefined) {
    throw new StartupError(
      `tools.shell needs the bubblewrap sandbox, and ${probe.why}; install bubblewrap (apt-get install bubblewrap), or set tools.shellUnsandboxed: true to run shell commands unsandboxed`,
    );
  }
  return sandboxedLauncher(probe.bwrap, {
    readOnly: settings.readOnly ?? [],
    hidden: hiddenPaths(places),
    network: settings.network ?? false,
    // Worktree isolation's default home is in the state dir: a child's worktree there is its workspace.
    workspaceAreas: [stateFiles(places.stateDir).worktrees],
  });
}

/**
 * For a daemon embedded without `prepareShell` (tests, library use): the sandbox with the default
 * places hidden, bwrap probed at the first command; without bwrap every command is refused.
 */
export function lazySandbox(network: boolean, env: NodeJS.ProcessEnv = process.env): ShellLauncher {
  let ready: Promise<ShellLauncher> | undefined;
  return {
    mode: 'sandboxed',
    async launch(command, workspace) {
      ready ??= prepareShell({ network }, { stateDir: defaultStateDir(env), env });
      return (await ready).launch(command, workspace);
    },
  };
}
