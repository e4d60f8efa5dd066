/**
 * How `run_shell` starts its command: inside bubblewrap when `bwrap` is installed and works,
 * otherwise plain `/bin/sh -c` (the daemon logs which, once). In the sandbox:
 *
 * - the whole filesystem is read-only, the workspace root is the one writable place, `/tmp` is a
 *   private tmpfs (gone with the command) and `/dev` a minimal one;
 * - a new pid namespace with its own /proc: the command cannot see or signal the daemon or
 *   other processes (nor read their /proc/PID/environ), and everything it starts dies with it;
 * - no network (a private loopback only) unless the policy's `shellNetwork` allows it;
 * - bwrap dies with the daemon (--die-with-parent).
 *
 * bwrap is looked for in fixed system folders only, never on a PATH a request could influence.
 */
import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';

export const BWRAP_LOCATIONS = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];

export interface ShellLaunch {
  readonly file: string;
  readonly args: string[];
  /** Whether the command runs in the sandbox. */
  readonly sandboxed: boolean;
}

/** The first installed bwrap that can actually build a sandbox here, or undefined. */
export async function findWorkingBwrap(): Promise<string | undefined> {
  for (const candidate of BWRAP_LOCATIONS) {
    const present = await access(candidate, constants.X_OK).then(
      () => true,
      () => false,
    );
    // Present but unusable (no user namespaces in this container, say) counts as absent.
    if (present) return (await probe(candidate)) ? candidate : undefined;
  }
  return undefined;
}

function probe(bwrap: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(bwrap, [...isolation('/', false), '--', '/bin/true'], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

function isolation(workspace: string, network: boolean): string[] {
  return [
    '--die-with-parent',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(network ? [] : ['--unshare-net']),
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc',
    '--tmpfs', '/tmp',
    // After the tmpfs, so a workspace under /tmp is the real one.
    '--bind', workspace, workspace,
    '--chdir', workspace,
  ];
}

/** The process to spawn for `command` in `workspace` (a real path). */
export function shellLaunch(command: string, workspace: string, bwrap: string | undefined, network: boolean): ShellLaunch {
  if (bwrap === undefined) return { file: '/bin/sh', args: ['-c', command], sandboxed: false };
  return { file: bwrap, args: [...isolation(workspace, network), '--', '/bin/sh', '-c', command], sandboxed: true };
}
