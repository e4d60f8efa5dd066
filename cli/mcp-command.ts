/** `subagentd mcp`: the MCP face on stdio (faces/mcp), over the shared daemon. */
import type { CommonSettings } from './options.js';
import { packageVersion } from '../common/package-info.js';
import { createMcpFace } from '../faces/mcp/mcp-face.js';
import { BoundedStdioTransport } from '../faces/mcp/stdio-transport.js';
import { DEFAULT_FACE_LINE_BYTES } from '../faces/stdio-lines.js';
import type { BackgroundMode } from '../tool/index.js';
import { openFaceClient, untilHostLeaves } from './face-client.js';
import { absoluteModel } from './run-command.js';

export interface FaceCommandOptions {
  readonly providers: readonly string[];
  readonly model: string | undefined;
  readonly isolation?: 'none' | 'worktree' | undefined;
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
      ...(options.isolation !== undefined && { isolation: options.isolation }),
    });
  } catch (error) {
    // A face that cannot be built (unknown provider, a mode the daemon cannot serve) exits with its reason.
    await service.close();
    throw error;
  }
  const transport = new BoundedStdioTransport(process.stdin, process.stdout, settings.config.limits?.faceLineBytes ?? DEFAULT_FACE_LINE_BYTES);
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  try {
    await face.server.connect(transport);
    await Promise.race([closed, untilHostLeaves()]);
  } finally {
    await face.close();
    await service.close();
    // Nothing more is read: a face stopped by a signal must not be kept alive by an open stdin.
    process.stdin.destroy();
  }
  return 0;
}
