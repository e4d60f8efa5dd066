/** `subagentd mcp`: the MCP face on stdio (faces/mcp), over the shared daemon. */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { CommonSettings } from './options.js';
import { packageVersion } from '../common/package-info.js';
import { createMcpFace } from '../faces/mcp/mcp-face.js';
import type { BackgroundMode } from '../tool/index.js';
import { openFaceClient, untilHostLeaves } from './face-client.js';
import { absoluteModel } from './run-command.js';

export interface FaceCommandOptions {
  readonly providers: readonly string[];
  readonly model: string | undefined;
}

export async function mcpCommand(settings: CommonSettings, options: FaceCommandOptions & { readonly backgroundMode?: BackgroundMode }): Promise<number> {
  const service = await openFaceClient(settings, 'mcp');
  const model = absoluteModel(options.model);
  let face;
  try {
    face = createMcpFace({
      service,
      providers: options.providers.length > 0 ? options.providers : ['spawn'],
      cwd: process.cwd(),
      version: packageVersion(),
      ...(model !== undefined && { model }),
      ...(options.backgroundMode !== undefined && { backgroundMode: options.backgroundMode }),
    });
  } catch (error) {
    // A face that cannot be built (unknown provider, a mode the daemon cannot serve) exits with its reason.
    await service.close();
    throw error;
  }
  try {
    await face.server.connect(new StdioServerTransport());
    await untilHostLeaves();
  } finally {
    await face.close();
    await service.close();
  }
  return 0;
}
