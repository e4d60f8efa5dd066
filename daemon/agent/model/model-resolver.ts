/**
 * Picks the model for a child: `scripted:FILE` replays a script (offline), any other name goes to
 * the configured OpenAI-compatible endpoint. The name comes from the start's
 * `agentOptions.model`, else the daemon's default (config, then SUBAGENTD_MODEL).
 */
import { statSync } from '../../../common/node-builtins.js';
import { isAbsolute, resolve } from 'node:path';
import type { DaemonConfig } from '../../config.js';
import { endpointFromEnv } from './endpoint-config.js';
import { PER_START_MODEL } from '../../../common/model-words.js';
import { ModelError, type ModelAdapter, type ModelResolver } from './model-adapter.js';
import type { OpenAICompatibleOptions } from './openai-compatible.js';
import { createScriptedAdapter, readScript } from './scripted.js';
import type { Upstream } from '../../upstream/upstream.js';

const SCRIPTED = 'scripted:';

export const NO_MODEL_HELP =
  'no model is configured. Set DEEPSEEK_API_KEY (DeepSeek, model deepseek-chat), or OPENAI_BASE_URL + OPENAI_API_KEY + ' +
  `SUBAGENTD_MODEL for any OpenAI-compatible server, or run offline with ${PER_START_MODEL} set to "scripted:/absolute/FILE.json" (see examples/).`;

/** A model named (per start, or as the default) with no server to send it to: say which setting is missing. */
const noEndpointFor = (name: string): string =>
  `model ${JSON.stringify(name)} has no endpoint: set OPENAI_BASE_URL (the server's chat-completions base URL, e.g. https://api.openai.com/v1) ` +
  'and OPENAI_API_KEY, or DEEPSEEK_API_KEY for a DeepSeek model; in the config, model.baseUrl and model.apiKeyEnv do the same.';

/** `howToSet` is appended to messages that ask for a variable (which environment counts, how to change it). */
/**
 * `upstream`: the daemon's endpoint governors (daemon/upstream/); every adapter made here sends
 * through its endpoint's. Without one (embedders, unit tests) each adapter sends ungoverned.
 */
export function createModelResolver(
  config: DaemonConfig['model'] = {},
  env: NodeJS.ProcessEnv = process.env,
  howToSet = '',
  upstream?: Upstream,
): ModelResolver {
  const adapters = new Map<string, ModelAdapter>();
  const scripted = scriptedAdapters();
  return (requested) => {
    const name = requested ?? config.default ?? env['SUBAGENTD_MODEL'];
    if (name?.startsWith(SCRIPTED)) {
      const file = name.slice(SCRIPTED.length);
      if (!isAbsolute(file)) throw new ModelError('config', `scripted model path must be absolute, got ${JSON.stringify(file)}`);
      return { adapter: scripted(resolve(file)), model: name };
    }
    const endpoint = endpointFromEnv(env, {
      baseUrl: config.baseUrl,
      apiKey: config.apiKeyEnv ? env[config.apiKeyEnv] : undefined,
      model: name,
    });
    if (!endpoint) throw new ModelError('config', (name?.trim() ? noEndpointFor(name.trim()) : NO_MODEL_HELP) + howToSet);
    const key = `${endpoint.baseUrl}\n${endpoint.apiKey}`;
    let adapter = adapters.get(key);
    if (!adapter) {
      adapter = openAICompatible(
        {
          baseUrl: endpoint.baseUrl,
          apiKey: endpoint.apiKey,
          ...(config.idleTimeoutMs !== undefined && { idleTimeoutMs: config.idleTimeoutMs }),
          ...(config.stepTimeoutMs !== undefined && { stepTimeoutMs: config.stepTimeoutMs }),
          ...(config.maxRetries !== undefined && { maxRetries: config.maxRetries }),
        },
        upstream,
      );
      adapters.set(key, adapter);
    }
    return { adapter, model: endpoint.model };
  };
}

/**
 * The `openai-compatible` adapter (openai-compatible.ts) with its endpoint's governor, both loaded
 * when the model is first resolved (a child's start), not with the daemon: a daemon whose
 * children never call a model endpoint never reads them. The options come from the checked
 * config and endpoint (endpoint-config.ts), so making the adapter cannot fail on them later than
 * it would have here.
 */
function openAICompatible(options: Omit<OpenAICompatibleOptions, 'governor'>, upstream: Upstream | undefined): ModelAdapter {
  const loading = Promise.all([import('./openai-compatible.js'), upstream?.governorFor(options.baseUrl, options.apiKey)]).then(
    ([{ createOpenAICompatibleAdapter }, governor]) => (loaded = createOpenAICompatibleAdapter({ ...options, ...(governor && { governor }) })),
  );
  // Its failure, if any, is each step's to report.
  loading.catch(() => undefined);
  let loaded: ModelAdapter | undefined;
  return {
    name: 'openai-compatible',
    step: (request) => (loaded ? loaded.step(request) : loading.then((adapter) => adapter.step(request))),
  };
}

/**
 * A script's adapter, read and checked again only when its file changed (size, mtime, inode):
 * parsing and validating it per child cost a tenth of a streamed child's CPU. Each child still
 * replays the script from its first step: the adapter keeps one cursor per child (per session).
 */
function scriptedAdapters(): (path: string) => ModelAdapter {
  const byPath = new Map<string, { readonly version: string; readonly adapter: ModelAdapter }>();
  return (path) => {
    let version: string | undefined;
    try {
      const stats = statSync(path);
      version = `${stats.size}:${stats.mtimeMs}:${stats.ino}`;
    } catch {
      // readScript names the failure.
    }
    const known = byPath.get(path);
    if (known && known.version === version) return known.adapter;
    const adapter = createScriptedAdapter(readScript(path));
    if (version !== undefined) byPath.set(path, { version, adapter });
    return adapter;
  };
}
