/** `subagentd acp`: the ACP face on stdio (faces/acp), over the shared daemon. */
import { ConfigError } from '../daemon/config.js';
import type { CommonSettings } from '../daemon/cli/options.js';
import type { FaceCommandOptions } from './mcp-command.js';

export async function acpCommand(_settings: CommonSettings, _options: FaceCommandOptions): Promise<number> {
  throw new ConfigError('the ACP face is not built yet');
}
