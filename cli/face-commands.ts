/** Argument parsing for the two faces, `subagentd mcp` and `subagentd acp` (loaded on demand). */
import { commonSettings, parse } from '../daemon/cli/options.js';

export async function faceCommand(face: 'mcp' | 'acp', argv: string[]): Promise<number> {
  const { values } = parse(argv, { provider: { type: 'string', multiple: true }, model: { type: 'string' } });
  const providers = (values['provider'] as unknown as string[] | undefined) ?? [];
  const options = { providers, model: values['model'] as string | undefined };
  const settings = commonSettings(values);
  if (face === 'mcp') return (await import('./mcp-command.js')).mcpCommand(settings, options);
  return (await import('./acp-command.js')).acpCommand(settings, options);
}
