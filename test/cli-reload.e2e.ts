/**
 * Configuration and environment are never frozen silently: the daemon's environment (its env
 * file) selects the model and the messages say so; `reload` (SIGHUP) applies a new env file and
 * config to new runs; status shows the config path, env file and model endpoint, never the key;
 * a shell whose model variables differ is warned; --config naming another config than the
 * running daemon's is an error; a broken config on reload keeps the old settings.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusResult } from '../protocol/index.js';
import { startChatCompletionsServer, textResponse, type ChatCompletionsServer } from './support/chat-completions-server.js';
import { CliSandbox } from './support/cli-harness.js';

const SECRET = 'sk-reload-test-secret';
const lit = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('reload and the daemon environment', () => {
  let box: CliSandbox;
  let model: ChatCompletionsServer;
  beforeAll(async () => {
    box = new CliSandbox('subagentd-cli-reload-');
    model = await startChatCompletionsServer();
  });
  afterAll(async () => {
    await box.cleanup();
    await model.close();
  });

  it('the env file, reload, status, drift warnings and --config mismatches', { timeout: 120_000 }, async () => {
    const envFile = join(box.stateDir, 'daemon.env');
    expect((await box.run(['start'])).code).toBe(0);

    // No model anywhere: the message names the daemon's environment and how to change it.
    const none = await box.run(['run', 'hello']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no model is configured');
    expect(none.stderr).toContain(`read from the DAEMON's environment, not this shell's: put them in ${envFile}`);
    expect(none.stderr).toContain('`subagentd reload`');

    // Setting it in this shell only: the run is warned that the daemon's environment counts.
    const shellOnly = await box.run(['run', 'hello'], { env: { OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: SECRET, SUBAGENTD_MODEL: 'fake-model' } });
    expect(shellOnly.code).toBe(1);
    expect(shellOnly.stderr).toContain(`OPENAI_BASE_URL here is ${model.baseUrl}, the daemon's endpoint is unset`);

    // The env file plus reload: new runs use it; status shows where, never the key.
    writeFileSync(envFile, `# the daemon's model\nOPENAI_BASE_URL=${model.baseUrl}\nOPENAI_API_KEY=${SECRET}\nSUBAGENTD_MODEL=fake-model\n`, { mode: 0o600 });
    const reload = await box.run(['reload', '--json']);
    expect(reload.code, reload.stderr).toBe(0);
    const { reloaded } = JSON.parse(reload.stdout) as { reloaded: NonNullable<StatusResult['config']> };
    expect(reloaded).toMatchObject({ envFile, envFileLoaded: true, generation: 1, model: { endpoint: model.baseUrl, model: 'fake-model', apiKey: 'set' } });
    expect(reload.stdout).not.toContain(SECRET);

    model.enqueue(textResponse(['answered by the reloaded endpoint']));
    const ran = await box.run(['run', '--quiet', 'hello'], { env: { OPENAI_BASE_URL: model.baseUrl } });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('answered by the reloaded endpoint\n');
    expect(ran.stderr).not.toContain("daemon's environment"); // the same endpoint: no warning
    expect(model.requests.at(-1)?.headers['authorization']).toBe(`Bearer ${SECRET}`);

    const [text, json] = await Promise.all([box.run(['status']), box.run(['status', '--json'])]);
    expect(text.stdout).toMatch(new RegExp(`config\\s+\\(none\\)  loaded \\S+ \\(reload 1\\)\\n`));
    expect(text.stdout).toMatch(new RegExp(`\nenv file\\s+${lit(envFile)}\n`));
    expect(text.stdout).toMatch(new RegExp(`\nmodel\\s+${lit(model.baseUrl)}  model fake-model  key set\n`));
    for (const out of [text.stdout, json.stdout]) expect(out).not.toContain(SECRET);

    // --config naming another config than the running daemon's is an error, not silently ignored.
    const other = box.file('other.json', {});
    const mismatch = await box.run(['status', '--config', other]);
    expect(mismatch.code).toBe(1);
    expect(mismatch.stderr).toContain(`runs with no config file, not ${other}`);
    expect(mismatch.stderr).toContain('`subagentd restart --config FILE` to switch');

    // restart --config switches; a config broken later fails the reload and keeps the old one.
    const restart = await box.run(['restart', '--config', other], { timeoutMs: 60_000 });
    expect(restart.code, restart.stderr).toBe(0);
    const switched = JSON.parse((await box.run(['status', '--json', '--config', other])).stdout) as StatusResult;
    expect(switched.config?.path).toBe(other);
    writeFileSync(other, '{ not json');
    const broken = await box.run(['reload']);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain('reload failed, the previous settings stay in force');
    const still = JSON.parse((await box.run(['status', '--json'])).stdout) as StatusResult;
    expect(still.config).toMatchObject({ path: other, generation: 0, reloadAttempts: 1, model: { endpoint: model.baseUrl } });
    expect((await box.run(['stop'])).code).toBe(0);
  });
});
