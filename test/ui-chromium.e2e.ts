/**
 * `subagentd ui` in a real browser (Debian's Chromium, driven by puppeteer-core): the page needs
 * the one-time link (401 without it, and the link works once); a lineage started after the page
 * loaded appears live as a tree, the selected run's text streams in, and a click on Cancel
 * cancels the run for its client. A screenshot goes to docs/.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterEach, expect, it } from 'vitest';
import { CLI, REPO, makeTempDir, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';

const CHROMIUM = '/usr/bin/chromium';
const clients = new ClientPool();
let daemon: DaemonProcess | undefined;
let browser: Browser | undefined;
afterEach(async () => {
  await browser?.close();
  await clients.closeAll();
  await daemon?.stop();
});

it('the one-time link opens a live page: the lineage as a tree, its text streaming, and Cancel cancels the run', async () => {
  const dir = makeTempDir('ui-script-');
  const script = join(dir, 'script.json');
  // Each level says something and delegates once; the grandchild's own delegation is refused at
  // maxDepth 2, and its next step waits a minute: the lineage stays running until cancelled.
  writeFileSync(
    script,
    JSON.stringify({
      steps: [
        { text: 'STREAM-MARK looking into it', toolCalls: [{ name: 'subagent', arguments: { description: 'deeper', prompt: 'go on' } }], usage: { promptTokens: 7, completionTokens: 3 } },
        { text: 'finished', delayMs: 60_000 },
      ],
    }),
  );
  daemon = await startE2eDaemon({ delegation: { spawn: { providers: ['spawn'], maxDepth: 2 } }, model: { default: `scripted:${script}` } });

  // The command prints the link.
  const printed = spawnSync(process.execPath, [CLI, 'ui', '--socket', daemon.socket, '--state-dir', daemon.stateDir, '--json'], { encoding: 'utf8', timeout: 20_000 });
  expect(printed.status, printed.stderr).toBe(0);
  const url = new URL((JSON.parse(printed.stdout) as { url: string }).url);
  expect(url.hostname).toBe('127.0.0.1');

  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 760 });
  const bare = await page.goto(url.origin + '/');
  expect(bare?.status()).toBe(401);
  const opened = await page.goto(url.href);
  expect(opened?.status()).toBe(200);
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', { timeout: 15_000 });
  // The link works once.
  expect((await fetch(url.href, { redirect: 'manual' })).status).toBe(401);

  // Started only now: whatever the page shows of it came live.
  const service = await clients.connect(daemon.socket, { clientInfo: { name: 'ui-e2e', version: '1' } });
  const run = await service.start('spawn', { label: 'reviewer', prompt: [{ type: 'text', text: 'start' }], parent: { sessionId: 'ui-root', cwd: dir }, signal: new AbortController().signal });
  const root = `li.run[data-run-id="${run.id}"]`;
  await page.waitForSelector(`${root}[data-state="running"] > ul > li.run[data-state="running"]`, { timeout: 20_000 });
  expect(await page.$eval(`${root} > .line .label`, (e) => e.textContent)).toBe('reviewer');
  expect(await page.$eval('#runs .client', (e) => e.textContent)).toContain('ui-e2e');
  await page.click(`${root} > .line .label`);
  await page.waitForFunction(() => document.getElementById('transcript')?.textContent?.includes('STREAM-MARK looking into it'), { timeout: 20_000 });
  await page.waitForFunction((selector) => document.querySelector(`${selector} > .line .tokens`)?.textContent?.startsWith('14 in / 6 out'), { timeout: 20_000 }, root);
  await page.screenshot({ path: join(REPO, 'docs', 'ui-web-view.png') });

  await page.click(`${root} > .line .cancel`);
  expect((await run.result).stopReason).toBe('aborted');
  await page.waitForSelector(`${root}[data-state="ended"]`, { timeout: 20_000 });
  await run.dispose();
});
