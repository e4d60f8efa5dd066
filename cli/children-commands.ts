/**
 * The continuable-children commands: `run --background`, `send`, `interrupt`, `children`. The
 * CLI is one parent (session `subagentd-cli`) whose children outlive each command: they are
 * owned by a key kept in the state dir (`cli-owner.key`, 0600), so any later `subagentd` of the
 * same user reaches them, and another client (another key) cannot. Failures are the daemon's
 * typed errors (NOT_OWNER, NOT_RESUMABLE, …), printed by main.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SubagentError, type ChildEntry, type ChildSettledNotice, type RemoteChildren, type RemoteSubagentService } from '../client/index.js';
import type { CommonSettings } from './options.js';
import { openClient } from './daemon-client.js';
import { table } from './format.js';
import { absoluteModel } from './run-command.js';

/** The parent session every CLI-started child belongs to. */
export const CLI_PARENT = 'subagentd-cli';

/** The CLI's owner key: made once per state dir, read by every later command. */
export function cliOwnerKey(stateDir: string): string {
  const path = join(stateDir, 'cli-owner.key');
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(24).toString('base64url');
  // `wx`: two first commands racing keep the first key.
  try {
    writeFileSync(path, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch {
    return readFileSync(path, 'utf8').trim();
  }
}

async function withChildren<T>(settings: CommonSettings, autoStart: boolean, use: (children: RemoteChildren, client: RemoteSubagentService) => Promise<T>): Promise<T> {
  const client = await openClient(settings, { autoStart, ownerKey: cliOwnerKey(settings.stateDir) });
  try {
    const children = client.children;
    if (!children) throw new SubagentError('UNSUPPORTED_OPERATION', 'this daemon does not offer continuable children: upgrade it (`subagentd restart`)');
    return await use(children, client);
  } finally {
    await client.close();
  }
}

const print = (settings: CommonSettings, json: unknown, human: string): void =>
  void process.stdout.write(settings.json ? `${JSON.stringify(json)}\n` : `${human}\n`);

export interface BackgroundRunOptions {
  readonly prompt: string;
  readonly provider: string;
  readonly model: string | undefined;
  readonly label: string | undefined;
  readonly worktree?: boolean;
  readonly baseRef?: string | undefined;
}

/** `run --background`: start a continuable child, print its id, exit. */
export function backgroundRunCommand(settings: CommonSettings, options: BackgroundRunOptions): Promise<number> {
  return withChildren(settings, true, async (children) => {
    const model = absoluteModel(options.model);
    const started = await children.start(options.provider, {
      prompt: [{ type: 'text', text: options.prompt }],
      parent: { sessionId: CLI_PARENT, cwd: process.cwd() },
      label: options.label ?? options.prompt.slice(0, 60),
      signal: new AbortController().signal,
      ...(model !== undefined && { agentOptions: { model } }),
      ...(options.worktree === true && { isolation: 'worktree' as const }),
      ...(options.baseRef !== undefined && { baseRef: options.baseRef }),
    });
    print(settings, started, started.childId);
    return 0;
  });
}

/** `send RUN MESSAGE [--wait]`: the child's next turn; `--wait` prints the notice when it settles. */
export function sendCommand(settings: CommonSettings, childId: string, message: string, wait: boolean): Promise<number> {
  return withChildren(settings, false, async (children) => {
    // Subscribed first: attaching also delivers notices that waited, so match this message's own.
    const notices: ChildSettledNotice[] = [];
    let arrived = (): void => undefined;
    const subscription = wait ? children.onSettled((notice) => (notices.push(notice), arrived())) : undefined;
    const { messageId } = await children.sendMessage(childId, [{ type: 'text', text: message }], CLI_PARENT);
    if (!subscription) {
      print(settings, { childId, messageId }, messageId);
      return 0;
    }
    const mine = (): ChildSettledNotice | undefined => notices.find((n) => n.childId === childId && n.messageId === messageId);
    while (!mine()) await new Promise<void>((resolve) => (arrived = resolve));
    subscription.dispose();
    const notice = mine()!;
    print(settings, notice, notice.text);
    return notice.stopReason === 'completed' ? 0 : 1;
  });
}

/** `interrupt RUN [--now]`: after the current step by default, at once with `--now`. */
export function interruptCommand(settings: CommonSettings, childId: string, now: boolean): Promise<number> {
  return withChildren(settings, false, async (children) => {
    const level = now ? 'now' : 'after-step';
    await children.interrupt(childId, CLI_PARENT, level);
    print(settings, { childId, level }, `interrupt (${level}) sent to ${childId}`);
    return 0;
  });
}

/** `children [RUN]`: the CLI's children with all their descendants, or one child's. */
export function childrenCommand(settings: CommonSettings, of: string | undefined): Promise<number> {
  return withChildren(settings, false, async (children) => {
    const listing = await children.list(of ?? CLI_PARENT, 'descendants');
    const rows = listing.entries.map((entry: ChildEntry) => [
      `${'  '.repeat(Math.max(0, (entry.depth ?? 1) - 1))}${entry.id}`,
      entry.status,
      entry.hasChildren ? 'yes' : 'no',
      entry.label ?? '',
    ]);
    const human = [
      listing.entries.length === 0 ? 'no children' : table(['CHILD', 'STATUS', 'CHILDREN', 'LABEL'], rows),
      ...listing.diagnostics.map((d) => `warning: ${d}`),
    ].join('\n');
    print(settings, listing, human);
    return 0;
  });
}
