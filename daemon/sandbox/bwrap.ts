/**
 * Finding a bubblewrap that works here. bwrap is looked for in fixed system folders only, never
 * on a PATH a request could influence, and "works" means it built a sandbox just now: present
 * but unable to create namespaces (a container without user namespaces, say) counts as absent.
 */
import { spawn } from 'node:child_process';
import { existsSync } from '../../common/node-builtins.js';
import { sandboxArgs, type SandboxView } from './sandbox-view.js';

export const BWRAP_LOCATIONS = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];

export type BwrapProbe = { readonly bwrap: string } | { readonly bwrap?: undefined; readonly why: string };

/** The first installed bwrap, if it can build the sandbox `run_shell` uses; else why not. */
export async function probeBwrap(): Promise<BwrapProbe> {
  for (const candidate of BWRAP_LOCATIONS) {
    if (!existsSync(candidate)) continue;
    const failure = await tryOnce(candidate);
    return failure === undefined ? { bwrap: candidate } : { why: `${candidate} cannot build a sandbox here: ${failure}` };
  }
  return { why: `bubblewrap is not installed (looked for ${BWRAP_LOCATIONS.join(', ')})` };
}

/** The first installed bwrap that can build a sandbox here, or undefined. */
export async function findWorkingBwrap(): Promise<string | undefined> {
  return (await probeBwrap()).bwrap;
}

const PROBE_VIEW: SandboxView = { readOnly: [], hidden: [], network: false };

/** Undefined when `/bin/true` ran in a sandbox like the real one; else bwrap's own complaint. */
function tryOnce(bwrap: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(bwrap, [...sandboxArgs(PROBE_VIEW, undefined), '--', '/bin/true'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 2048) stderr += chunk.toString('utf8');
    });
    child.once('error', (error) => resolve(error.message));
    child.once('close', (code, signal) => {
      if (code === 0) return resolve(undefined);
      const said = stderr.trim().split('\n').pop()?.replace(/^bwrap: /, '');
      resolve(said || (code === null ? `killed by ${signal ?? 'a signal'}` : `exit code ${code}`));
    });
  });
}
