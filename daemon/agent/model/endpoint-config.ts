/**
 * Where the `openai-compatible` adapter sends requests, read from the environment.
 *
 * Resolution, first match wins (empty or blank values count as unset; overrides beat env):
 * 1. A base URL (`overrides.baseUrl` or `OPENAI_BASE_URL`): any chat-completions server. The key is
 *    `overrides.apiKey` or `OPENAI_API_KEY` (`DEEPSEEK_API_KEY` is accepted only when the URL is
 *    DeepSeek's own host, so a DeepSeek key is never sent elsewhere). The model is
 *    `overrides.model` or `SUBAGENTD_MODEL` (`deepseek-chat` for DeepSeek's host).
 * 2. A DeepSeek key (`overrides.apiKey` or `DEEPSEEK_API_KEY`): DeepSeek's base URL, model
 *    `overrides.model`, `SUBAGENTD_MODEL` or `deepseek-chat`.
 * 3. Nothing: `undefined`. `OPENAI_API_KEY` alone does not select api.openai.com; set
 *    `OPENAI_BASE_URL` explicitly for that.
 *
 * A half-configured endpoint (a base URL without a key or model, or a URL that is not http(s))
 * throws `ModelError('config')` rather than falling through, so a typo is never silently ignored.
 */
import { ModelError } from './model-adapter.js';
import { DEEPSEEK_BASE_URL, DEEPSEEK_DEFAULT_MODEL, isDeepSeekBaseUrl } from './deepseek.js';

export interface Endpoint {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly model: string;
}

export interface EndpointOverrides {
  readonly baseUrl?: string | undefined;
  readonly apiKey?: string | undefined;
  readonly model?: string | undefined;
}

function present(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

export function endpointFromEnv(env: NodeJS.ProcessEnv, overrides: EndpointOverrides = {}): Endpoint | undefined {
  const model = present(overrides.model) ?? present(env['SUBAGENTD_MODEL']);
  const baseUrl = present(overrides.baseUrl) ?? present(env['OPENAI_BASE_URL']);

  if (baseUrl !== undefined) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new ModelError('config', `model base URL is not a valid URL: ${JSON.stringify(baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ModelError('config', `model base URL must be http(s), got ${JSON.stringify(url.protocol)}`);
    }
    const deepseek = isDeepSeekBaseUrl(baseUrl);
    const apiKey =
      present(overrides.apiKey) ??
      present(env['OPENAI_API_KEY']) ??
      (deepseek ? present(env['DEEPSEEK_API_KEY']) : undefined);
    if (apiKey === undefined) {
      throw new ModelError(
        'config',
        `a model base URL is set (${baseUrl}) but no API key: set OPENAI_API_KEY (any value for servers without auth)`,
      );
    }
    const chosen = model ?? (deepseek ? DEEPSEEK_DEFAULT_MODEL : undefined);
    if (chosen === undefined) {
      throw new ModelError('config', `a model base URL is set (${baseUrl}) but no model: set SUBAGENTD_MODEL`);
    }
    return { baseUrl, apiKey, model: chosen };
  }

  const deepseekKey = present(overrides.apiKey) ?? present(env['DEEPSEEK_API_KEY']);
  if (deepseekKey !== undefined) {
    return { baseUrl: DEEPSEEK_BASE_URL, apiKey: deepseekKey, model: model ?? DEEPSEEK_DEFAULT_MODEL };
  }
  return undefined;
}
