/**
 * The continuable-children commands as a person or a script uses them: `run --background`, then
 * `children`, `send`, `interrupt` from later processes, each with --json, against one daemon
 * (started on demand) in a private sandbox. The scripted model answers each turn in order.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliSandbox } from './support/cli-harness.js';

let box: CliSandbox;
let model: string;
beforeAll(() => {
  box = new CliSandbox('subagentd-cli-children-');
  model = `scripted:${box.file('turns.json', { steps: [{ text: 'first turn done' }, { text: 'second turn done', delayMs: 200 }, { text: 'third', delayMs: 20_000 }] })}`;
});
afterAll(async () => {
  await box.run(['stop'], { timeoutMs: 15_000 });
  await box.cleanup();
});

const json = (stdout: string): any => JSON.parse(stdout.trim());

it('run --background prints a child id; children, send --wait and interrupt reach it from later processes', async () => {
  const started = await box.run(['run', '--background', '--model', model, '--label', 'helper', '--json', 'first task']);
  expect(started.code, started.stderr).toBe(0);
  const { childId, messageId } = json(started.stdout);
  expect(messageId).toMatch(/^msg_/);

  // The first turn settles in the background; `children` shows the child idle once it has.
  let listing: any;
  const deadline = Date.now() + 15_000;
  do {
    listing = json((await box.run(['children', '--json'])).stdout);
  } while (listing.entries[0]?.status !== 'idle' && Date.now() < deadline);
  expect(listing).toEqual({ entries: [{ id: childId, status: 'idle', label: 'helper', hasChildren: false, parentId: 'subagentd-cli', depth: 1 }], diagnostics: [] });
  const human = await box.run(['children']);
  expect(human.stdout).toMatch(new RegExp(`^CHILD\\s+STATUS\\s+CHILDREN\\s+LABEL\\n${childId}\\s+idle\\s+no\\s+helper`));

  const sent = await box.run(['send', childId, 'second task', '--wait', '--json']);
  expect(sent.code, sent.stderr).toBe(0);
  // The first turn's notice may have waited for the CLI (delivered on attach): --wait skips it and
  // prints the notice of its own message's turn.
  expect(json(sent.stdout)).toMatchObject({ childId, stopReason: 'completed', text: 'helper finished. Its closing message:\nsecond turn done' });

  // A third turn that takes long: interrupt --now stops it.
  const third = await box.run(['send', childId, 'third task', '--json']);
  expect(third.code, third.stderr).toBe(0);
  const interrupted = await box.run(['interrupt', childId, '--now', '--json']);
  expect(interrupted.code, interrupted.stderr).toBe(0);
  expect(json(interrupted.stdout)).toEqual({ childId, level: 'now' });
  const until = Date.now() + 15_000;
  do {
    listing = json((await box.run(['children', '--json'])).stdout);
  } while (listing.entries[0]?.status !== 'idle' && Date.now() < until);
  expect(listing.entries[0]).toMatchObject({ id: childId, status: 'idle' });
});

it('refuses what it cannot do with the daemon\'s typed error', async () => {
  const unknown = await box.run(['send', 'no-such-child', 'hello']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toMatch(/^subagentd: no child no-such-child is recorded/m);
  const missing = await box.run(['send', 'only-an-id']);
  expect(missing.code).toBe(2); // a usage error
  expect(missing.stderr).toContain('send needs a child and a message');
});
