/**
 * Picks the model for a child: `scripted:FILE` replays a script (offline), any other name goes to
 * the configured OpenAI-compatible endpoint. The name comes from the start's
 * `agentOptions.model`, else the daemon's default (config, then SUBAGENTD_MODEL).
 */
import { isAbsolute, resolve } from 'node:path';
import type { DaemonConfig } from '../../config.js';
import { endpointFromEnv } from './endpoint-config.js';
import { ModelError, type ModelAdapter, type ModelResolver } from './model-adapter.js';
import { createOpenAICompatibleAdapter } from './openai-compatible.js';
import { createScriptedAdapter, readScript } from './scripted.js';

const SCRIPTED = 'scripted:';

export const NO_MODEL_HELP =
  'no model is configured. Set DEEPSEEK_API_KEY (DeepSeek, model deepseek-chat), or OPENAI_BASE_URL + OPENAI_API_KEY + ' +
  'SUBAGENTD_MODEL for any OpenAI-compatible server, or run offline with --model scripted:FILE (see examples/).';

/** `howToSet` is appended to messages that ask for a variable (which environment counts, how to change it). */
export function createModelResolver(config: DaemonConfig['model'] = {}, env: NodeJS.ProcessEnv = process.env, howToSet = ''): ModelResolver {
  const adapters = new Map<string, ModelAdapter>();
  return (requested) => {
    const name = requested ?? config.default ?? env['SUBAGENTD_MODEL'];
    if (name?.startsWith(SCRIPTED)) {
      const file = name.slice(SCRIPTED.length);
      if (!isAbsolute(file)) throw new ModelError('config', `scripted model path must be absolute, got ${JSON.stringify(file)}`);
      // Read per child: each child replays the script from its first step.
      return { adapter: createScriptedAdapter(readScript(resolve(file))), model: name };
    }
    const endpoint = endpointFromEnv(env, {
      baseUrl: config.baseUrl,
      apiKey: config.apiKeyEnv ? env[config.apiKeyEnv] : undefined,
      model: name,
    });
    if (!endpoint) throw new ModelError('config', NO_MODEL_HELP + howToSet);
    const key = `${endpoint.baseUrl}\n${endpoint.apiKey}`;
    let adapter = adapters.get(key);
    if (!adapter) {
      adapter = createOpenAICompatibleAdapter({
        baseUrl: endpoint.baseUrl,
        apiKey: endpoint.apiKey,
        ...(config.idleTimeoutMs !== undefined && { idleTimeoutMs: config.idleTimeoutMs }),
        ...(config.stepTimeoutMs !== undefined && { stepTimeoutMs: config.stepTimeoutMs }),
        ...(config.maxRetries !== undefined && { maxRetries: config.maxRetries }),
      });
      adapters.set(key, adapter);
    }
    return { adapter, model: endpoint.model };
  };
}
